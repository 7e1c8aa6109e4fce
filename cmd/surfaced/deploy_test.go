package main

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/internal/testkit"
)

// The deployment recipes of deploy/ start the daemon with the image's
// configuration and flags of their own. These tests read each recipe as its
// runtime would (compose's interpolation, Kubernetes' $(VAR) expansion),
// then resolve every node's command line as `surfaced serve` does, against
// the image's file system as make image stages it: a flag the daemon does
// not know, a setting it refuses, an agent it cannot load fails here.

// stageImage stages the image's file system (without its binaries) and
// returns its root.
func stageImage(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		testkit.Missing(t, "bash is needed to stage the image: %v", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(testkit.RepoRoot(), "deploy", "image", "build"), "--stage", dir, "--no-binaries")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy/image/build --stage: %v\n%s", err, out)
	}
	return filepath.Join(dir, "rootfs")
}

// serveInImage resolves a `surfaced serve` command line (args[0] is serve)
// as the daemon does, with the image's paths under root and extra files
// (path in the container: path here), and loads its agents.
func serveInImage(t *testing.T, root string, args []string, env map[string]string, files map[string]string) *config.File {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("the command is %q: want serve and its flags (the image's entrypoint is surfaced)", args)
	}
	var f daemonFlags
	cmd := &cobra.Command{Use: "serve"}
	f.register(cmd)
	if err := cmd.Flags().Parse(args[1:]); err != nil {
		t.Fatalf("surfaced %s: %v", strings.Join(args, " "), err)
	}
	if len(cmd.Flags().Args()) != 0 {
		t.Fatalf("surfaced serve takes no arguments, got %q", cmd.Flags().Args())
	}
	path, ok := files[f.config]
	if !ok {
		path = filepath.Join(root, filepath.FromSlash(f.config))
	}
	file, err := config.Resolve(path, f.flags(cmd), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("surfaced %s: %v", strings.Join(args, " "), err)
	}
	ms, err := file.Manifests()
	if err != nil {
		t.Fatalf("surfaced %s: the agents: %v", strings.Join(args, " "), err)
	}
	if len(ms) == 0 {
		t.Fatalf("surfaced %s: no agents", strings.Join(args, " "))
	}
	for _, m := range ms {
		if m.GoBuild != "" {
			t.Errorf("agent %s would be built at start (go_build): the image has no Go toolchain", m.Name)
		}
	}
	return file
}

func TestImageConfigurationServes(t *testing.T) {
	root := stageImage(t)
	f := serveInImage(t, root, []string{"serve", "--config", "/etc/surfaced/surfaced.yaml"}, nil, nil)
	if f.DataDir != "/data" || f.Addr != "0.0.0.0:7800" {
		t.Errorf("data_dir %q, addr %q: want /data (the volume) and 0.0.0.0:7800", f.DataDir, f.Addr)
	}
	if f.StoreKind() != config.StoreSQLite {
		t.Errorf("store %q: one node keeps its sessions in SQLite under /data", f.Store)
	}
}

// composeFile is what the test reads of a compose file.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		ReadOnly    bool              `yaml:"read_only"`
		DependsOn   map[string]any    `yaml:"depends_on"`
	} `yaml:"services"`
}

// interpolate is compose's ${VAR}, ${VAR:-default} and ${VAR:?error}.
func interpolate(t *testing.T, s string, env map[string]string) string {
	t.Helper()
	re := regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)(?:(:-|:\?)([^}]*))?\}`)
	return re.ReplaceAllStringFunc(s, func(m string) string {
		p := re.FindStringSubmatch(m)
		if v := env[p[1]]; v != "" {
			return v
		}
		switch p[2] {
		case ":-":
			return p[3]
		case ":?":
			t.Errorf("compose: %s is required (%s)", p[1], p[3])
		}
		return ""
	})
}

func TestComposeThreeNodes(t *testing.T) {
	root := stageImage(t)
	raw, err := os.ReadFile(filepath.Join(testkit.RepoRoot(), "deploy", "compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SURFACED_TOKEN": "a-token-every-node-accepts"}
	var c composeFile
	if err := yaml.Unmarshal([]byte(interpolate(t, string(raw), env)), &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if _, ok := c.Services["postgres"]; !ok {
		t.Error("compose.yaml has no postgres service")
	}
	if _, ok := c.Services["etcd"]; !ok {
		t.Error("compose.yaml has no etcd service")
	}
	var nodes, advertised, published []string
	for name, s := range c.Services {
		if s.Image != "surfaced:latest" {
			continue
		}
		nodes = append(nodes, name)
		f := serveInImage(t, root, s.Command, s.Environment, nil)
		if f.Cluster.Provider != config.ProviderEtcd || f.Cluster.Name == "" {
			t.Errorf("%s: cluster %+v: want the etcd provider and a cluster name", name, f.Cluster)
		}
		if f.StoreKind() != config.StorePostgres {
			t.Errorf("%s: store %q: a cluster shares PostgreSQL", name, f.Store)
		}
		if f.Token != env["SURFACED_TOKEN"] {
			t.Errorf("%s: token %q: every node must accept the same token", name, f.Token)
		}
		// The hosts the node dials are the compose services.
		u, err := url.Parse(f.Store)
		if err != nil || u.Hostname() != "postgres" {
			t.Errorf("%s: store %q does not name the postgres service", name, f.Store)
		}
		for _, e := range f.Cluster.EtcdEndpoints {
			if h, _, _ := net.SplitHostPort(e); h != "etcd" {
				t.Errorf("%s: etcd endpoint %q is not the etcd service", name, e)
			}
		}
		if _, ok := s.DependsOn["postgres"]; !ok {
			t.Errorf("%s does not wait for postgres", name)
		}
		host, port, _ := net.SplitHostPort(f.Cluster.AdvertiseAddr)
		if host != name {
			t.Errorf("%s advertises %q: the others reach it by its service name", name, f.Cluster.AdvertiseAddr)
		}
		if _, bport, _ := net.SplitHostPort(f.Cluster.BindAddr); bport != port {
			t.Errorf("%s binds the cluster transport at %q but advertises %q", name, f.Cluster.BindAddr, f.Cluster.AdvertiseAddr)
		}
		advertised = append(advertised, f.Cluster.AdvertiseAddr)
		if !slices.ContainsFunc(s.Volumes, func(v string) bool { return strings.HasSuffix(v, ":/data") }) {
			t.Errorf("%s: no volume at /data", name)
		}
		if !s.ReadOnly {
			t.Errorf("%s: the root file system should be read-only", name)
		}
		for _, p := range s.Ports {
			if !strings.HasSuffix(p, ":7800") {
				t.Errorf("%s publishes %q: want the HTTP port 7800", name, p)
			}
			published = append(published, p)
		}
	}
	if len(nodes) != 3 {
		t.Fatalf("compose.yaml runs %d surfaced nodes (%v), want 3", len(nodes), nodes)
	}
	slices.Sort(advertised)
	if len(slices.Compact(advertised)) != 3 {
		t.Errorf("the nodes advertise %v: each needs its own address", advertised)
	}
	slices.Sort(published)
	if len(slices.Compact(published)) != 3 {
		t.Errorf("the nodes publish %v: each needs its own port", published)
	}
}

// k8sObject is what the test reads of a Kubernetes object.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Replicas    int    `yaml:"replicas"`
		ServiceName string `yaml:"serviceName"`
		ClusterIP   string `yaml:"clusterIP"`
		Selector    struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Ports []struct {
			Name string `yaml:"name"`
			Port int    `yaml:"port"`
		} `yaml:"ports"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sContainer struct {
	Args []string `yaml:"args"`
	Env  []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe   *k8sProbe `yaml:"startupProbe"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	VolumeMounts   []struct {
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

func readK8s(t *testing.T) []k8sObject {
	t.Helper()
	dir := filepath.Join(testkit.RepoRoot(), "deploy", "k8s")
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []k8sObject
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(f)
		for {
			var o k8sObject
			if err := dec.Decode(&o); err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("%s: %v", p, err)
			}
			objs = append(objs, o)
		}
		f.Close()
	}
	return objs
}

func TestKubernetesThreeNodes(t *testing.T) {
	root := stageImage(t)
	objs := readK8s(t)
	find := func(kind, name string) *k8sObject {
		for i := range objs {
			if objs[i].Kind == kind && objs[i].Metadata.Name == name {
				return &objs[i]
			}
		}
		t.Fatalf("deploy/k8s has no %s %s", kind, name)
		return nil
	}
	sts := find("StatefulSet", "surfaced")
	cm := find("ConfigMap", "surfaced-config")
	headless := find("Service", "surfaced-headless")
	find("PodDisruptionBudget", "surfaced")
	find("Role", "surfaced-membership")

	if sts.Spec.Replicas != 3 || sts.Spec.ServiceName != headless.Metadata.Name {
		t.Errorf("StatefulSet: %d replicas behind %q: want 3 behind the headless Service", sts.Spec.Replicas, sts.Spec.ServiceName)
	}
	if headless.Spec.ClusterIP != "None" {
		t.Errorf("surfaced-headless: clusterIP %q, want None", headless.Spec.ClusterIP)
	}
	if len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("StatefulSet: %d containers, want 1", len(sts.Spec.Template.Spec.Containers))
	}
	c := sts.Spec.Template.Spec.Containers[0]

	// The configuration the ConfigMap mounts, with the image's paths here.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "surfaced.yaml")
	body := strings.ReplaceAll(cm.Data["surfaced.yaml"], "/etc/surfaced/", filepath.Join(root, "etc", "surfaced")+"/")
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	mounted := ""
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(m.MountPath, "/etc/surfaced-") {
			mounted = m.MountPath + "/surfaced.yaml"
		}
	}
	// Kubernetes expands $(VAR) in args from the container's env; the
	// values that come from the pod or a Secret are examples here.
	vars := map[string]string{"POD_IP": "10.1.2.3", "SURFACED_STORE": "postgres://surfaced:secret@surfaced-postgres:5432/surfaced?sslmode=require"}
	for _, e := range c.Env {
		if e.Value != "" {
			vars[e.Name] = e.Value
		}
	}
	args := make([]string, len(c.Args))
	re := regexp.MustCompile(`\$\(([A-Z_][A-Z0-9_]*)\)`)
	for i, a := range c.Args {
		args[i] = re.ReplaceAllStringFunc(a, func(m string) string {
			v, ok := vars[m[2:len(m)-1]]
			if !ok {
				t.Errorf("arg %q: $(%s) is not in the container's env", a, m[2:len(m)-1])
			}
			return v
		})
	}
	f := serveInImage(t, root, args, map[string]string{"SURFACED_TOKEN": "from-the-secret"}, map[string]string{mounted: cfg})
	if f.Cluster.Provider != config.ProviderKubernetes {
		t.Errorf("cluster.provider %q, want k8s", f.Cluster.Provider)
	}
	if f.StoreKind() != config.StorePostgres {
		t.Errorf("store %q: a cluster shares PostgreSQL", f.Store)
	}
	if f.Cluster.AdvertiseAddr != "10.1.2.3:7900" {
		t.Errorf("advertise_addr %q: the provider names members by pod IP and cluster port", f.Cluster.AdvertiseAddr)
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	_, httpPort, _ := net.SplitHostPort(f.Addr)
	_, clusterPort, _ := net.SplitHostPort(f.Cluster.BindAddr)
	if httpPort != "7800" || ports["http"] != 7800 || clusterPort != "7900" || ports["cluster"] != 7900 {
		t.Errorf("ports %v; addr %q, cluster.bind_addr %q: want http 7800 and cluster 7900 on both sides", ports, f.Addr, f.Cluster.BindAddr)
	}
	for _, p := range headless.Spec.Ports {
		if ports[p.Name] != p.Port {
			t.Errorf("surfaced-headless port %s is %d, the container's is %d", p.Name, p.Port, ports[p.Name])
		}
	}
	for name, p := range map[string]*k8sProbe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || !slices.Contains([]string{"/healthz", "/readyz"}, p.HTTPGet.Path) || p.HTTPGet.Port != "http" {
			t.Errorf("the %s probe %+v: want /healthz or /readyz on the http port", name, p)
		}
	}
	// Every selector selects the pods.
	pod := sts.Spec.Template.Metadata.Labels
	for _, o := range objs {
		sel := o.Spec.Selector.MatchLabels
		if o.Kind == "Service" {
			continue
		}
		for k, v := range sel {
			if pod[k] != v {
				t.Errorf("%s %s selects %s=%s, which the pods do not carry", o.Kind, o.Metadata.Name, k, v)
			}
		}
	}
}
