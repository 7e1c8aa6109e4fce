package testkit

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// ChildPIDs lists the running processes of the binary bin that are
// children of this test process (a daemon run inside the test spawns its
// agents as its own children). A zombie (exited, not yet reaped) is not
// running and is left out.
func ChildPIDs(bin string) []int { return ChildPIDsOf(os.Getpid(), bin) }

// ChildPIDsOf lists the running processes of the binary bin whose parent is
// the process parent (a daemon started by a test, and its agents).
func ChildPIDsOf(parent int, bin string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	me := strconv.Itoa(parent)
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink("/proc/" + e.Name() + "/exe")
		if err != nil || exe != bin {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis: state, ppid, …
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[0] != "Z" && f[1] == me {
			out = append(out, p)
		}
	}
	return out
}
