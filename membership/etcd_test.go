package membership_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/surfaced/surfaced/internal/etcdtest"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/membership"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// One member (a single member per process is race-clean): it registers its
// key on a lease, sees itself in the topology, and at shutdown deletes the
// key and revokes the lease (the library's provider leaves the lease alive);
// a second Shutdown is harmless (a rejoin and the graceful path both call it).
func TestEtcdMemberRegistersAndLeavesCleanly(t *testing.T) {
	srv := etcdtest.Start(t)
	p, err := membership.NewEtcd(membership.EtcdConfig{Endpoints: []string{srv.Endpoint}, Prefix: "/t", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet() }))
	c := cluster.New(sys, cluster.Configure("unit", p, disthash.New(), remote.Configure("127.0.0.1", 0)))
	c.StartMember()

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/t/unit/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != "/t/unit/"+sys.ID || resp.Kvs[0].Lease == 0 {
		t.Fatalf("registration: %v %+v", err, resp)
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	testkit.Eventually(t, 10*time.Second, func() bool { return c.MemberList.ContainsMemberID(sys.ID) }, "the member to see itself in the topology")

	c.Shutdown(true)
	if err := p.Shutdown(false); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	resp, err = cli.Get(ctx, "/t/unit/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the key outlived the member: %v %+v", err, resp.Kvs)
	}
	ttl, err := cli.TimeToLive(ctx, lease)
	if err != nil || ttl.TTL != -1 {
		t.Fatalf("the member's lease is still alive: %v %+v", err, ttl)
	}
}

// The start with etcd unreachable is tested on the daemon
// (test/cluster TestEtcdUnreachableFailsStart): a second member started in
// one process races inside the library (remote.Start sets grpc's global
// logger).
func TestEtcdConfig(t *testing.T) {
	if _, err := membership.NewEtcd(membership.EtcdConfig{}); err == nil {
		t.Fatal("no endpoints accepted")
	}
}
