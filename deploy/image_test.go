// Package deploy_test checks the container image that make image builds:
// it builds it (deploy/image/build), starts it with podman and drives the
// demo agent inside it over HTTP. The recipes' configurations are checked
// against the daemon's own flags in cmd/surfaced (deploy_test.go), and the
// Kubernetes manifests and the systemd unit by make lint
// (scripts/lint-deploy).
package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/surfaced/surfaced/internal/testkit"
)

// need finds a program or ends the test (a failure on CI).
func need(t *testing.T, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		testkit.Missing(t, "%s is needed to build and run the image (apt-get install %s): %v", prog, pkg, err)
	}
	return p
}

// podman runs podman with the image store the build used, and returns its
// output.
func podman(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("podman", args...)
	cmd.Env = append(os.Environ(), "STORAGE_DRIVER="+storageDriver())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

func storageDriver() string {
	if d := os.Getenv("STORAGE_DRIVER"); d != "" {
		return d
	}
	return "vfs" // what works as root in any container, and what deploy/image/build uses
}

func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image (-short)")
	}
	need(t, "buildah", "buildah")
	need(t, "podman", "podman")
	root := testkit.RepoRoot()
	tag := fmt.Sprintf("test-%d", os.Getpid())
	image := "localhost/surfaced-test:" + tag

	build := exec.Command(filepath.Join(root, "deploy", "image", "build"))
	build.Dir = root
	build.Env = append(os.Environ(), "IMAGE=localhost/surfaced-test", "VERSION="+tag, "STORAGE_DRIVER="+storageDriver())
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("deploy/image/build: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = podman(t, "rmi", "-f", image, "localhost/surfaced-test:latest")
	})

	t.Run("config", func(t *testing.T) {
		out, err := podman(t, "image", "inspect", "--format", "{{json .Config}}", image)
		if err != nil {
			t.Fatalf("podman image inspect: %v\n%s", err, out)
		}
		var cfg struct {
			User       string
			Volumes    map[string]any
			Entrypoint []string
			Env        []string
		}
		if err := json.Unmarshal([]byte(out), &cfg); err != nil {
			t.Fatalf("the image's config %q: %v", out, err)
		}
		if cfg.User != "65532:65532" {
			t.Errorf("the image runs as %q: want the non-root 65532:65532", cfg.User)
		}
		if _, ok := cfg.Volumes["/data"]; !ok || len(cfg.Volumes) != 1 {
			t.Errorf("volumes %v: want /data", cfg.Volumes)
		}
		if len(cfg.Entrypoint) != 1 || cfg.Entrypoint[0] != "/usr/local/bin/surfaced" {
			t.Errorf("entrypoint %q", cfg.Entrypoint)
		}
		out, err = podman(t, "image", "inspect", "--format", "{{len .RootFS.Layers}}", image)
		if err != nil || out != "1" {
			t.Errorf("the image has %s layers (%v): want one, on an empty base", out, err)
		}
	})

	t.Run("run", func(t *testing.T) { runImage(t, image, "surfaced-test-"+tag) })
}

// runImage starts the image as it is (its own configuration, the SQLite
// store on its volume) and drives the demo agent: /readyz answers, a
// session on the demo agent starts, and its increment command answers.
func runImage(t *testing.T, image, name string) {
	args := []string{"run", "-d", "--name", name, "-p", "127.0.0.1::7800", "--cgroup-manager", "cgroupfs"}
	// runc runs on cgroup v1, v2 and hybrid hierarchies alike (crun refuses
	// the hybrid one): use it where it is installed.
	if _, err := exec.LookPath("runc"); err == nil {
		args = append([]string{"--runtime", "runc"}, args...)
	}
	// podman's default limits (a million open files) need CAP_SYS_RESOURCE
	// to set, which a container running this test may lack (this VM's
	// does), and podman's own processes may run under lower limits than
	// this one: ask for little, within this process's own.
	for limit, res := range map[string]int{"nofile": unix.RLIMIT_NOFILE, "nproc": unix.RLIMIT_NPROC} {
		n := uint64(4096)
		var rl unix.Rlimit
		if err := unix.Getrlimit(res, &rl); err == nil {
			n = min(n, rl.Max)
		}
		args = append(args, "--ulimit", fmt.Sprintf("%s=%d:%d", limit, n, n))
	}
	args = append(args, image)
	id, err := podman(t, args...)
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, id)
	}
	if i := strings.LastIndexByte(id, '\n'); i >= 0 {
		id = id[i+1:]
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := podman(t, "logs", id)
			t.Logf("the container's log:\n%s", logs)
		}
		_, _ = podman(t, "rm", "-f", "-t", "10", id)
	})
	port, err := podman(t, "port", id, "7800/tcp")
	if err != nil {
		t.Fatalf("podman port: %v\n%s", err, port)
	}
	base := "http://" + strings.TrimSpace(strings.Split(port, "\n")[0])
	client := &http.Client{Timeout: 5 * time.Second}

	testkit.Eventually(t, 60*time.Second, func() bool {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "the container's /readyz at %s never answered 200", base)

	// No token configured: the daemon made one and printed the URL with it.
	var token string
	testkit.Eventually(t, 10*time.Second, func() bool {
		logs, _ := podman(t, "logs", id)
		if m := regexp.MustCompile(`\?token=([0-9a-f]+)`).FindStringSubmatch(logs); m != nil {
			token = m[1]
		}
		return token != ""
	}, "the container's log has no start URL with its token")

	call := func(path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("POST %s: %d %q: %v", path, resp.StatusCode, b, err)
		}
		return resp.StatusCode, out
	}
	code, created := call("/api/sessions", `{"agent":"demo"}`)
	id2, _ := created["sessionId"].(string)
	if code != http.StatusCreated && code != http.StatusOK || id2 == "" {
		t.Fatalf("creating a demo session: %d %v", code, created)
	}
	// The first command waits for the agent (a static binary in the image)
	// to start and register its surface.
	code, res := call("/api/sessions/"+id2+"/surfaces/demo/increment", `{}`)
	data, _ := res["data"].(map[string]any)
	if code != http.StatusOK || res["ok"] != true || data["count"] != float64(1) {
		t.Fatalf("demo increment in the image: %d %v", code, res)
	}
}
