package membership

import (
	"os"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
)

// Automanaged is the library's automanaged provider for several processes
// on one machine (development): each member serves a health endpoint on
// automanagedPort, on every interface, and polls the static list of peers.
// Its web server prints a banner on standard output, which is the daemon's
// channel for its start URL; the banner is sent to /dev/null.
func Automanaged(refresh time.Duration, port int, peers ...string) cluster.ClusterProvider {
	return &quietAutomanaged{AutoManagedProvider: automanaged.NewWithConfig(refresh, port, peers...)}
}

type quietAutomanaged struct {
	*automanaged.AutoManagedProvider
}

// stdoutMu serializes the swap of os.Stdout (members started concurrently
// in one process).
var stdoutMu sync.Mutex

func (q *quietAutomanaged) StartMember(c *cluster.Cluster) error {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	// The provider's web server takes os.Stdout as its log output when it is
	// created, inside StartMember.
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		old := os.Stdout
		os.Stdout = null
		defer func() { os.Stdout = old }()
	}
	return q.AutoManagedProvider.StartMember(c)
}
