package agentcheck

import (
	"fmt"
	"io"
	"strings"
)

// Outcome is how a step went.
type Outcome int

const (
	// Passed: the step ran and found nothing wrong.
	Passed Outcome = iota
	// Failed: the step found at least one problem.
	Failed
	// Skipped: the step could not run (the agent never became ready).
	Skipped
)

func (o Outcome) String() string {
	switch o {
	case Failed:
		return "FAIL"
	case Skipped:
		return "skip"
	}
	return "ok"
}

// Problem is one thing the agent did wrong, in plain sentences.
type Problem struct {
	// What is wrong, as one sentence.
	What string
	// Expected is what the protocol asks for there.
	Expected string
	// Came is what the agent did instead.
	Came string
	// Stderr is a line of the agent's stderr that may say why (empty when
	// it said nothing useful).
	Stderr string
}

// Step is one check and its outcome.
type Step struct {
	// Name is what was checked: "start", "surface demo", "command
	// demo/increment", "prompt", "abort", "restart".
	Name    string
	Outcome Outcome
	// Summary says what happened, in one line (for a passed step, what was
	// seen; for a skipped one, why).
	Summary string
	// Seen lists what the agent wrote during the step (a prompt's turn).
	Seen     string
	Problems []Problem
	// Notes are things worth knowing that the daemon tolerates.
	Notes []string
}

func (s *Step) fail(p Problem) {
	s.Outcome = Failed
	s.Problems = append(s.Problems, p)
}

func (s *Step) note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

// Report is the outcome of a check.
type Report struct {
	// Agent is the agent's name and Argv how it was started.
	Agent string
	Argv  []string
	Steps []*Step
}

func (r *Report) step(name string) *Step {
	s := &Step{Name: name}
	r.Steps = append(r.Steps, s)
	return s
}

// Step returns the first step with the name, or nil.
func (r *Report) Step(name string) *Step {
	for _, s := range r.Steps {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Failed is the number of failed steps.
func (r *Report) Failed() int {
	n := 0
	for _, s := range r.Steps {
		if s.Outcome == Failed {
			n++
		}
	}
	return n
}

// OK reports whether every step that ran passed.
func (r *Report) OK() bool { return r.Failed() == 0 }

// Write prints the report for people: one line per step, each problem with
// what was expected and what came, then the verdict.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "surfaced agent check: %s (%s)\n\n", r.Agent, strings.Join(r.Argv, " "))
	for _, s := range r.Steps {
		line := fmt.Sprintf("%-5s %s", s.Outcome, s.Name)
		if s.Summary != "" {
			line += ": " + s.Summary
		}
		b.WriteString(line + "\n")
		writeField(&b, "seen", s.Seen)
		for _, p := range s.Problems {
			writeField(&b, "problem", p.What)
			writeField(&b, "  expected", p.Expected)
			writeField(&b, "  came", p.Came)
			writeField(&b, "  stderr", p.Stderr)
		}
		for _, n := range s.Notes {
			writeField(&b, "note", n)
		}
	}
	b.WriteString("\n")
	ran := 0
	for _, s := range r.Steps {
		if s.Outcome != Skipped {
			ran++
		}
	}
	switch failed := r.Failed(); {
	case failed > 0:
		fmt.Fprintf(&b, "FAIL: %d of %d checks failed.\n", failed, len(r.Steps))
	case ran < len(r.Steps):
		fmt.Fprintf(&b, "PASS: %d checks passed, %d skipped.\n", ran, len(r.Steps)-ran)
	default:
		fmt.Fprintf(&b, "PASS: all %d checks passed.\n", ran)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeField writes "      label: text", continuing long text on lines of
// its own under the text.
func writeField(b *strings.Builder, label, text string) {
	if text == "" {
		return
	}
	prefix := "      " + label + ": "
	pad := strings.Repeat(" ", len(prefix))
	for i, l := range strings.Split(text, "\n") {
		if i == 0 {
			b.WriteString(prefix + l + "\n")
		} else {
			b.WriteString(pad + l + "\n")
		}
	}
}
