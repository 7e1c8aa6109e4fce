// Package membership has the cluster membership providers of the daemon: an
// etcd provider written for the traps of the library's own (start-up that
// blocks forever, a lease left alive at shutdown, a watch that never
// recovers), and the automanaged provider for several processes on one
// machine in development.
package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/surfaced/surfaced/internal/plainjson"
)

// EtcdConfig configures the etcd provider.
type EtcdConfig struct {
	Endpoints []string
	// Prefix is the key prefix of the cluster's members (default /surfaced).
	Prefix string
	// TTL is the member key's lease: a member that stops renewing leaves
	// the topology this long after (default 3 s).
	TTL time.Duration
	// DialTimeout and OpTimeout bound every etcd call (defaults 5 s, 5 s).
	DialTimeout time.Duration
	OpTimeout   time.Duration
	Logger      *slog.Logger
}

// Etcd is a cluster.ClusterProvider backed by etcd v3 (it works with
// Debian's etcd 3.4 server). Each member puts one key under
// <prefix>/<cluster>/<member id> on a lease it keeps alive; every member
// watches the prefix and publishes the topology. Every call is bounded, the
// lease is revoked at shutdown, and the watch and the registration are
// re-established after etcd comes back.
type Etcd struct {
	cfg    EtcdConfig
	log    *slog.Logger
	client *clientv3.Client

	c      *cluster.Cluster
	key    string
	value  string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	lease clientv3.LeaseID

	shutdownOnce sync.Once
	shutdownErr  error
}

// NewEtcd returns an etcd provider. Nothing is dialled until StartMember.
func NewEtcd(cfg EtcdConfig) (*Etcd, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/surfaced"
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 3 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Etcd{cfg: cfg, log: log.With("provider", "etcd")}, nil
}

// member is what a member publishes about itself.
type member struct {
	ID    string   `json:"id"`
	Host  string   `json:"host"`
	Port  int32    `json:"port"`
	Kinds []string `json:"kinds"`
}

func (p *Etcd) prefix() string { return p.cfg.Prefix + "/" + p.c.Config.Name + "/" }

// StartMember registers this member and starts following the topology.
func (p *Etcd) StartMember(c *cluster.Cluster) error {
	return p.start(c, true)
}

// StartClient follows the topology without registering.
func (p *Etcd) StartClient(c *cluster.Cluster) error {
	return p.start(c, false)
}

func (p *Etcd) start(c *cluster.Cluster, register bool) error {
	p.c = c
	client, err := clientv3.New(clientv3.Config{Endpoints: p.cfg.Endpoints, DialTimeout: p.cfg.DialTimeout,
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second})
	if err != nil {
		return fmt.Errorf("etcd %v: %w", p.cfg.Endpoints, err)
	}
	p.client = client
	p.ctx, p.cancel = context.WithCancel(context.Background())

	host, portText, err := net.SplitHostPort(c.ActorSystem.Address())
	if err != nil {
		return fmt.Errorf("etcd: member address: %w", err)
	}
	port, _ := strconv.Atoi(portText)
	b, _ := plainjson.Marshal(member{ID: c.ActorSystem.ID, Host: host, Port: int32(port), Kinds: c.GetClusterKinds()})
	p.key, p.value = p.prefix()+c.ActorSystem.ID, string(b)

	if register {
		if err := p.register(); err != nil {
			p.abort()
			return err
		}
	}
	rev, err := p.refresh()
	if err != nil {
		p.abort()
		return err
	}
	p.wg.Add(1)
	go p.watch(rev)
	if register {
		p.wg.Add(1)
		go p.keepAlive()
	}
	return nil
}

// register puts this member's key on a new lease.
func (p *Etcd) register() error {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.OpTimeout)
	defer cancel()
	ttl := int64((p.cfg.TTL + time.Second - 1) / time.Second)
	g, err := p.client.Grant(ctx, ttl)
	if err != nil {
		return fmt.Errorf("etcd %v: grant a lease (is etcd running and reachable there?): %w", p.cfg.Endpoints, err)
	}
	if _, err := p.client.Put(ctx, p.key, p.value, clientv3.WithLease(g.ID)); err != nil {
		return fmt.Errorf("etcd %v: register %s: %w", p.cfg.Endpoints, p.key, err)
	}
	p.mu.Lock()
	p.lease = g.ID
	p.mu.Unlock()
	return nil
}

// keepAlive renews the lease; when the lease is lost (etcd was away longer
// than its TTL) it registers again on a new one.
func (p *Etcd) keepAlive() {
	defer p.wg.Done()
	for p.ctx.Err() == nil {
		p.mu.Lock()
		lease := p.lease
		p.mu.Unlock()
		ch, err := p.client.KeepAlive(p.ctx, lease)
		if err == nil {
			for range ch {
			}
		}
		if p.ctx.Err() != nil {
			return
		}
		p.log.Warn("etcd: member lease lost; registering again", "key", p.key, "err", err)
		for p.ctx.Err() == nil {
			if err := p.register(); err == nil {
				break
			} else {
				p.log.Warn("etcd: registration failed; retrying", "err", err)
			}
			sleep(p.ctx, time.Second)
		}
	}
}

// refresh reads every member and publishes the topology; it returns the
// revision to watch from.
func (p *Etcd) refresh() (int64, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.OpTimeout)
	defer cancel()
	resp, err := p.client.Get(ctx, p.prefix(), clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("etcd %v: list members: %w", p.cfg.Endpoints, err)
	}
	var members cluster.Members
	for _, kv := range resp.Kvs {
		var m member
		if err := json.Unmarshal(kv.Value, &m); err != nil || m.ID == "" {
			p.log.Warn("etcd: member key not understood", "key", string(kv.Key), "err", err)
			continue
		}
		members = append(members, &cluster.Member{Id: m.ID, Host: m.Host, Port: m.Port, Kinds: m.Kinds})
	}
	p.c.MemberList.UpdateClusterTopology(members)
	return resp.Header.Revision, nil
}

// watch follows changes under the prefix; each one re-reads the members (the
// list is small and a re-read is always consistent). A broken watch (etcd
// restarted, compaction) is re-established from a fresh read.
func (p *Etcd) watch(rev int64) {
	defer p.wg.Done()
	for p.ctx.Err() == nil {
		wch := p.client.Watch(clientv3.WithRequireLeader(p.ctx), p.prefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				p.log.Warn("etcd: watch interrupted", "err", err)
				break
			}
			if r, err := p.refresh(); err == nil {
				rev = r
			}
		}
		if p.ctx.Err() != nil {
			return
		}
		sleep(p.ctx, 500*time.Millisecond)
		if r, err := p.refresh(); err == nil {
			rev = r
		} else {
			p.log.Warn("etcd: cannot read members; retrying", "err", err)
		}
	}
}

// Shutdown deletes this member's key and revokes its lease (so that the
// others see it leave at once, not a TTL later), then closes the client.
// It may be called more than once; later calls return the first result.
func (p *Etcd) Shutdown(graceful bool) error {
	p.shutdownOnce.Do(func() { p.shutdownErr = p.shutdown() })
	return p.shutdownErr
}

func (p *Etcd) shutdown() error {
	if p.cancel == nil {
		return nil
	}
	// Stop the loops first: the keep-alive loop must not register the key
	// again after it is deleted.
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	lease := p.lease
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.OpTimeout)
	defer cancel()
	var errs []error
	if lease != 0 {
		if _, err := p.client.Delete(ctx, p.key); err != nil {
			errs = append(errs, fmt.Errorf("etcd: deregister: %w", err))
		}
		if _, err := p.client.Revoke(ctx, lease); err != nil {
			errs = append(errs, fmt.Errorf("etcd: revoke the member lease: %w", err))
		}
	}
	p.client.Close()
	return errors.Join(errs...)
}

// abort undoes a failed start: nothing is left to shut down.
func (p *Etcd) abort() {
	p.cancel()
	p.client.Close()
	p.shutdownOnce.Do(func() {})
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
