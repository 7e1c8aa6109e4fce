// The tools scripts/lint-deploy runs over deploy/, pinned apart from
// tools/go.mod (their dependencies never meet the daemon's or the other
// tools'): kubeconform, and k8s.io/kube-openapi for the Kubernetes API's
// OpenAPI document it ships as test data (pkg/schemaconv/testdata), from
// which k8sschema makes kubeconform's schemas.
module github.com/surfaced/surfaced/deploy/tools

go 1.26.7

tool github.com/yannh/kubeconform/cmd/kubeconform

require (
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/hashicorp/go-retryablehttp v0.7.7 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.1 // indirect
	github.com/yannh/kubeconform v0.7.0 // indirect
	golang.org/x/text v0.25.0 // indirect
	k8s.io/kube-openapi v0.0.0-20230717233707-2695361300d9 // indirect; its swagger.json: the Kubernetes 1.27 API
	sigs.k8s.io/yaml v1.4.0 // indirect
)
