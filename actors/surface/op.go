package surface

import "strings"

// DefaultFence is the code-fence info string RenderOp uses when Op.Fence is empty.
const DefaultFence = "surface-op"

// Op is a surface operation that must go through the conversation rather than a command: it
// needs the model's judgment, should be visible in the history, or later turns must be able to
// refer to it. RenderOp turns it into the text of a user prompt.
//
// The zero value renders as an op with an empty title and tool and the default fence.
type Op struct {
	// Title is the first line of the prompt, shown to the model and in the history.
	Title string
	// Tool names the tool the model is expected to call.
	Tool string
	// Fence is the code fence's info string; empty means DefaultFence.
	Fence string
	// Params become "key: value" lines in this order. A param whose value is empty is skipped,
	// so callers can pass optional settings without filtering them first.
	Params [][2]string
}

// RenderOp renders op as
//
//	<title>\n\n```<fence>\ntool: <tool>\n<k1>: <v1>\n...\n```
//
// with no trailing newline and no escaping or trimming of any value. The browser client's
// Surfaced.renderSurfaceOp produces the same bytes; testdata/surface-op.golden.json pins both.
func RenderOp(op Op) string {
	fence := op.Fence
	if fence == "" {
		fence = DefaultFence
	}
	n := len(op.Title) + len(fence) + len(op.Tool) + len("\n\n```\ntool: \n```")
	for _, p := range op.Params {
		n += len(p[0]) + len(p[1]) + len("\n: ")
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(op.Title)
	b.WriteString("\n\n```")
	b.WriteString(fence)
	b.WriteString("\ntool: ")
	b.WriteString(op.Tool)
	for _, p := range op.Params {
		if p[1] == "" {
			continue
		}
		b.WriteByte('\n')
		b.WriteString(p[0])
		b.WriteString(": ")
		b.WriteString(p[1])
	}
	b.WriteString("\n```")
	return b.String()
}
