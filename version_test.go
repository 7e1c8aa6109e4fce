package surfaced

import (
	"runtime/debug"
	"testing"
)

func TestResolveVersion(t *testing.T) {
	vcs := func(mainVersion string, settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/surfaced/surfaced", Version: mainVersion}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	const rev = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"
	for _, tc := range []struct {
		name                    string
		version, commit         string
		info                    *debug.BuildInfo
		wantVersion, wantCommit string
	}{
		{"stamped by make build", "v1.2.0-3-g9f8e7d6", "9f8e7d6", vcs("(devel)", "vcs.revision", rev), "v1.2.0-3-g9f8e7d6", "9f8e7d6"},
		{"stamped outside git keeps dev", "dev", "", nil, "dev", ""},
		{"go run: nothing recorded", "dev", "", vcs("(devel)"), "dev", ""},
		{"go build in a checkout", "dev", "", vcs("v0.0.0-20261204043441-1a2b3c4d5e6f", "vcs.revision", rev, "vcs.modified", "false"), "v0.0.0-20261204043441-1a2b3c4d5e6f", "1a2b3c4"},
		{"go build in a dirty checkout", "dev", "", vcs("v0.0.0-20261204043441-1a2b3c4d5e6f+dirty", "vcs.revision", rev, "vcs.modified", "true"), "v0.0.0-20261204043441-1a2b3c4d5e6f+dirty", "1a2b3c4"},
		{"revision without a module version", "dev", "", vcs("(devel)", "vcs.revision", rev, "vcs.modified", "true"), "1a2b3c4-dirty", "1a2b3c4"},
		{"revision, clean", "dev", "", vcs("", "vcs.revision", rev, "vcs.modified", "false"), "1a2b3c4", "1a2b3c4"},
		{"go install module@version", "dev", "", vcs("v1.4.0"), "v1.4.0", ""},
		{"stamped version, commit from the build info", "v1.2.0", "", vcs("(devel)", "vcs.revision", rev), "v1.2.0", "1a2b3c4"},
		{"short revision kept whole", "dev", "", vcs("(devel)", "vcs.revision", "abc"), "abc", "abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, c := resolveVersion(tc.version, tc.commit, tc.info)
			if v != tc.wantVersion || c != tc.wantCommit {
				t.Errorf("resolveVersion(%q, %q) = %q, %q; want %q, %q", tc.version, tc.commit, v, c, tc.wantVersion, tc.wantCommit)
			}
		})
	}
}

func TestVersionString(t *testing.T) {
	defer func(v, c string) { Version, Commit = v, c }(Version, Commit)
	Version, Commit = "v1.2.0", "1a2b3c4"
	if got := VersionString(); got != "v1.2.0 (commit 1a2b3c4)" {
		t.Errorf("VersionString() = %q", got)
	}
	Version, Commit = "dev", ""
	if got := VersionString(); got != "dev" {
		t.Errorf("VersionString() without a commit = %q", got)
	}
}
