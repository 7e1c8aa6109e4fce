//go:build !k8s

package membership

import (
	"errors"

	"github.com/asynkron/protoactor-go/cluster"
)

// KubernetesBuilt reports whether this binary has the Kubernetes provider.
// It is left out of the default build: its client library triples the
// binary's size for a provider most installations never use.
const KubernetesBuilt = false

// Kubernetes fails in a binary built without the provider.
func Kubernetes() (cluster.ClusterProvider, error) {
	return nil, errors.New("this surfaced binary was built without the Kubernetes provider: build it with `go build -tags k8s ./cmd/surfaced`")
}
