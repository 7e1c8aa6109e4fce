//go:build k8s

package membership

import (
	"fmt"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/k8s"
)

// KubernetesBuilt reports whether this binary has the Kubernetes provider.
const KubernetesBuilt = true

// Kubernetes is the library's Kubernetes provider: members are the pods of
// the namespace labelled by the provider itself (it patches its own pod's
// labels, so the pod's service account needs get, list, watch and patch on
// pods). A member counts only while all its containers are Ready. It works
// only inside a pod (in-cluster configuration). See docs/cluster.md.
func Kubernetes() (cluster.ClusterProvider, error) {
	p, err := k8s.New()
	if err != nil {
		return nil, fmt.Errorf("kubernetes provider (it runs only inside a pod): %w", err)
	}
	return p, nil
}
