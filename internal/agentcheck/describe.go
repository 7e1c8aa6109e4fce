package agentcheck

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/surfaced/surfaced/agentproc"
)

// What the agent did, said for people.

// exitText says how a process ended: "exit code 2", "signal SIGKILL".
func exitText(st agentproc.ExitStatus) string {
	switch {
	case st.Signal != "":
		return "signal " + st.Signal
	case st.Code == -1 && st.Err != nil:
		return st.Err.Error()
	default:
		return "exit code " + strconv.Itoa(st.Code)
	}
}

// excerpt quotes the start of b, at most n bytes of it.
func excerpt(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…"
}

// quote is excerpt for text shown in quotes.
func quote(s string, n int) string { return strconv.Quote(excerpt([]byte(s), n)) }

// took rounds a duration for a summary.
func took(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}

// lastStderr is the last non-blank stderr line of agent process inc among
// es ("" when it wrote none).
func lastStderr(es []entry, inc int) string {
	for i := len(es) - 1; i >= 0; i-- {
		if e := es[i]; e.kind == stderr && e.inc == inc && strings.TrimSpace(string(e.line)) != "" {
			return excerpt(e.line, 300)
		}
	}
	return ""
}

// stdout describes what agent process inc wrote among es: the line types in
// order (repeats counted), responses with their command and outcome, and
// lines that are not protocol lines quoted.
func stdout(es []entry, inc int) string {
	var items []string
	last, count := "", 0
	flush := func() {
		if last == "" {
			return
		}
		if count > 1 {
			items = append(items, fmt.Sprintf("%s ×%d", last, count))
		} else {
			items = append(items, last)
		}
	}
	n := 0
	for _, e := range es {
		if e.kind != received || e.inc != inc {
			continue
		}
		n++
		item := lineItem(e)
		if item == last {
			count++
			continue
		}
		flush()
		last, count = item, 1
	}
	flush()
	switch {
	case n == 0:
		return "nothing on stdout"
	case len(items) > 16:
		// The start and the end say the most: what came first, and where it stopped.
		items = append(append(items[:10:10], "…"), items[len(items)-5:]...)
	}
	what := "lines"
	if n == 1 {
		what = "line"
	}
	return fmt.Sprintf("%d %s on stdout: %s", n, what, strings.Join(items, ", "))
}

// lineItem names one received line.
func lineItem(e entry) string {
	switch {
	case e.typ == "":
		return quote(string(e.line), 60) + " (not a protocol line: " + e.invalid + ")"
	case e.typ == agentproc.TypeResponse:
		var r agentproc.Response
		_ = json.Unmarshal(e.line, &r)
		s := "response to " + r.Command
		if r.Command == "" {
			s = "response"
		}
		if r.Success {
			return s + " (success)"
		}
		if r.Error != "" {
			return s + " (failed: " + excerpt([]byte(r.Error), 80) + ")"
		}
		return s + " (failed)"
	}
	return e.typ
}
