package surfaced

import "runtime/debug"

// unstamped is Version before the linker or the build info says otherwise.
const unstamped = "dev"

func init() {
	info, _ := debug.ReadBuildInfo()
	Version, Commit = resolveVersion(Version, Commit, info)
}

// resolveVersion keeps what the linker stamped and fills in the rest from
// the build info: the main module's version when the toolchain knows one
// (go install module@v1.2.3, or the pseudo-version Go derives from the
// checkout), else the commit with -dirty as `git describe --always --dirty`
// would print it; the commit from the vcs.revision setting, shortened as
// `git rev-parse --short` does.
func resolveVersion(version, commit string, info *debug.BuildInfo) (string, string) {
	if info == nil {
		return version, commit
	}
	var revision string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	short := revision
	if len(short) > 7 {
		short = short[:7]
	}
	if commit == "" {
		commit = short
	}
	if version == unstamped {
		switch {
		case info.Main.Version != "" && info.Main.Version != "(devel)":
			version = info.Main.Version
		case short != "" && modified:
			version = short + "-dirty"
		case short != "":
			version = short
		}
	}
	return version, commit
}

// VersionString is Version with the commit, as `surfaced version` prints it:
// "v1.2.0 (commit 1a2b3c4)", or the version alone when the commit is unknown.
func VersionString() string {
	if Commit == "" {
		return Version
	}
	return Version + " (commit " + Commit + ")"
}
