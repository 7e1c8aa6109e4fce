// The tools scripts/lint-deploy runs over deploy/, pinned apart from
// tools/go.mod (their dependencies never meet the daemon's or the other
// tools'): kubeconform, and k8s.io/kube-openapi for the Kubernetes API's
// OpenAPI document it ships as test data (pkg/schemaconv/testdata), from
// which k8sschema makes kubeconform's schemas; and the Compose
// Specification's loader, compose-go, which composecheck runs over
// deploy/compose.
module github.com/surfaced/surfaced/deploy/tools

go 1.26.7

tool github.com/yannh/kubeconform/cmd/kubeconform

require github.com/compose-spec/compose-go/v2 v2.16.2

require (
	github.com/distribution/reference v0.5.0 // indirect
	github.com/docker/go-connections v0.4.0 // indirect
	github.com/docker/go-units v0.5.0 // indirect
	github.com/go-viper/mapstructure/v2 v2.4.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/hashicorp/go-retryablehttp v0.7.7 // indirect
	github.com/mattn/go-shellwords v1.0.12 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.1 // indirect
	github.com/sirupsen/logrus v1.10.1 // indirect
	github.com/xhit/go-str2duration/v2 v2.1.0 // indirect
	github.com/yannh/kubeconform v0.7.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	go.yaml.in/yaml/v4 v4.0.0-rc.4 // indirect
	golang.org/x/sync v0.14.0 // indirect
	golang.org/x/sys v0.20.0 // indirect
	golang.org/x/text v0.25.0 // indirect
	k8s.io/kube-openapi v0.0.0-20230717233707-2695361300d9 // indirect; its swagger.json: the Kubernetes 1.27 API (go mod tidy drops it: add it back)
	sigs.k8s.io/yaml v1.4.0 // indirect
)
