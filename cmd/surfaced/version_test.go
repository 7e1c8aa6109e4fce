package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/internal/testkit"
)

// makeBuild runs `make build` of the repository into a temporary binary.
func makeBuild(t *testing.T, env ...string) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		testkit.Missing(t, "make is not installed")
	}
	bin := filepath.Join(t.TempDir(), "surfaced")
	cmd := exec.Command("make", "-s", "build", "BIN="+bin)
	cmd.Dir = testkit.RepoRoot()
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	return bin
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = testkit.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return strings.TrimSpace(string(out))
}

func TestMakeBuildStampsVersionAndCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testkit.Missing(t, "git is not installed")
	}
	if err := exec.Command("git", "-C", testkit.RepoRoot(), "rev-parse", "HEAD").Run(); err != nil {
		t.Skip("not a git checkout; TestMakeBuildOutsideGit covers that")
	}
	bin := makeBuild(t)
	want := "surfaced " + output(t, "git", "describe", "--always", "--dirty") +
		" (commit " + output(t, "git", "rev-parse", "--short", "HEAD") + ")"
	if got := output(t, bin, "version"); got != want {
		t.Errorf("surfaced version = %q, want %q", got, want)
	}
	// The root command's --version says the same.
	if got := output(t, bin, "--version"); got != strings.Replace(want, "surfaced ", "surfaced version ", 1) {
		t.Errorf("surfaced --version = %q, want the version of %q", got, want)
	}
}

func TestMakeBuildOutsideGit(t *testing.T) {
	// git answers "not a repository": make build stamps nothing and the
	// binary has nothing recorded either (-buildvcs=false, or go build
	// itself would fail on the broken git).
	bin := makeBuild(t, "GIT_DIR="+filepath.Join(t.TempDir(), "no-repository"), "GOFLAGS=-buildvcs=false")
	if got := output(t, bin, "version"); got != "surfaced dev" {
		t.Errorf("surfaced version outside git = %q, want %q", got, "surfaced dev")
	}
}

// An unstamped binary (go build, go run) reports what the Go toolchain
// recorded in it: the version and vcs.revision that `go version -m` reads.
func TestUnstampedVersionIsTheBuildInfo(t *testing.T) {
	bin := testkit.Build(t, "./cmd/surfaced")
	modVersion, revision, modified := "", "", false
	for _, line := range strings.Split(output(t, "go", "version", "-m", bin), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod" && f[1] == "github.com/surfaced/surfaced":
			modVersion = f[2]
		case len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			revision = strings.TrimPrefix(f[1], "vcs.revision=")
		case len(f) == 2 && f[0] == "build" && f[1] == "vcs.modified=true":
			modified = true
		}
	}
	got := output(t, bin, "version")
	switch {
	case revision != "":
		short := revision[:min(7, len(revision))]
		version := modVersion
		if version == "" || version == "(devel)" {
			version = short
			if modified {
				version += "-dirty"
			}
		}
		if want := "surfaced " + version + " (commit " + short + ")"; got != want {
			t.Errorf("surfaced version = %q, want %q (from go version -m)", got, want)
		}
	case modVersion != "" && modVersion != "(devel)":
		if want := "surfaced " + modVersion; got != want {
			t.Errorf("surfaced version = %q, want %q (from go version -m)", got, want)
		}
	default:
		if got != "surfaced dev" {
			t.Errorf("surfaced version with nothing recorded = %q, want %q", got, "surfaced dev")
		}
	}
}
