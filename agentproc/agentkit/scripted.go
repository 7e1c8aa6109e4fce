package agentkit

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// ScriptedPrefix starts every reply of the ScriptedModel, so nobody mistakes
// it for a language model.
const ScriptedPrefix = "(scripted model — no LLM configured) "

// ScriptedModel is a deterministic stand-in for a language model, used when no
// LLM is configured. It reacts to words in the last user message (see the
// package documentation for the list) so that tests and demos can drive every
// path of an agent without a network. The zero value is ready to use.
type ScriptedModel struct {
	// Pace is the pause between the text deltas of ordinary replies; 0 means none.
	Pace time.Duration
	// SlowPace is the pause between the deltas of a "slow" reply; 0 means 50 ms.
	SlowPace time.Duration
	// Exit ends the process for "crash"; nil means os.Exit.
	Exit func(code int)
}

// Info describes the model for get_state.
func (m *ScriptedModel) Info() ModelInfo { return ModelInfo{ID: "scripted", Provider: "agentkit"} }

// slowDeltas is the number of deltas of a "slow" reply.
const slowDeltas = 40

// Stream answers req deterministically.
func (m *ScriptedModel) Stream(ctx context.Context, req Request) iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		s := &script{m: m, ctx: ctx, yield: yield}
		s.run(req)
	}
}

// script is one scripted answer; once yield reports the consumer is gone,
// every further step is a no-op.
type script struct {
	m     *ScriptedModel
	ctx   context.Context
	yield func(Delta, error) bool
	gone  bool
}

func (s *script) emit(d Delta) bool {
	if s.gone {
		return false
	}
	if !s.yield(d, nil) {
		s.gone = true
	}
	return !s.gone
}

func (s *script) fail(err error) {
	if !s.gone {
		s.yield(Delta{}, err)
		s.gone = true
	}
}

// pause waits d, or fails the stream when ctx ends first.
func (s *script) pause(d time.Duration) bool {
	if d <= 0 {
		if s.ctx.Err() != nil {
			s.fail(s.ctx.Err())
			return false
		}
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		s.fail(s.ctx.Err())
		return false
	}
}

// say streams text in several deltas of a few words each.
func (s *script) say(text string) bool {
	parts := strings.SplitAfter(text, " ")
	const wordsPerDelta = 3
	for i := 0; i < len(parts); i += wordsPerDelta {
		if i > 0 && !s.pause(s.m.Pace) {
			return false
		}
		if !s.emit(Delta{Kind: DeltaText, Text: strings.Join(parts[i:min(i+wordsPerDelta, len(parts))], "")}) {
			return false
		}
	}
	return true
}

func (s *script) finish(r StopReason) { s.emit(Delta{Kind: DeltaFinish, Reason: r}) }

// callTool streams one tool call, its arguments split in two deltas the way
// real models split them.
func (s *script) callTool(id, name string, args any) {
	b, _ := plainjson.Marshal(args)
	text := string(b)
	cut := len(text) / 2
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	if s.emit(Delta{Kind: DeltaToolCall, Index: 0, ID: id, Name: name}) &&
		s.emit(Delta{Kind: DeltaToolCallArgs, Index: 0, Text: text[:cut]}) &&
		s.emit(Delta{Kind: DeltaToolCallArgs, Index: 0, Text: text[cut:]}) {
		s.finish(StopToolUse)
	}
}

func (s *script) run(req Request) {
	if len(req.Messages) == 0 {
		if s.say(ScriptedPrefix + "There is nothing to answer yet.") {
			s.finish(StopStop)
		}
		return
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == RoleToolResult {
		s.reportToolResults(req.Messages)
		return
	}
	s.answer(req, last.Text)
}

// reportToolResults answers the tool results that follow the last assistant message.
func (s *script) reportToolResults(msgs []Message) {
	start := len(msgs)
	for start > 0 && msgs[start-1].Role == RoleToolResult {
		start--
	}
	var sb strings.Builder
	sb.WriteString(ScriptedPrefix)
	for _, r := range msgs[start:] {
		if r.IsError {
			fmt.Fprintf(&sb, "The %s tool failed: %s. ", r.ToolName, r.Text)
		} else {
			fmt.Fprintf(&sb, "The %s tool answered: %s. ", r.ToolName, r.Text)
		}
	}
	if s.say(strings.TrimSpace(sb.String())) {
		s.finish(StopStop)
	}
}

func hasTool(req Request, name string) bool {
	for _, t := range req.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// triggerWords splits a prompt into lower-case words; a trigger matches a word
// that starts with it ("thinking" matches "think", "task" does not match "ask").
func triggerWords(text string) func(trigger string) bool {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	return func(trigger string) bool {
		for _, w := range words {
			if strings.HasPrefix(w, trigger) {
				return true
			}
		}
		return false
	}
}

// echoArgument finds "echo:" (any case) and returns the text after it.
func echoArgument(text string) (string, bool) {
	const marker = "echo:"
	for i := 0; i+len(marker) <= len(text); i++ {
		if strings.EqualFold(text[i:i+len(marker)], marker) {
			return strings.TrimSpace(text[i+len(marker):]), true
		}
	}
	return "", false
}

func (s *script) answer(req Request, prompt string) {
	has := triggerWords(prompt)
	callID := fmt.Sprintf("scripted-call-%d", len(req.Messages))

	if has("think") {
		for _, t := range []string{"The prompt asks me to think. ", "I am a script, ", "so my thoughts are fixed: ", "answer plainly."} {
			if !s.emit(Delta{Kind: DeltaThinking, Text: t}) || !s.pause(s.m.Pace) {
				return
			}
		}
	}

	echoText, isEcho := echoArgument(prompt)
	switch {
	case has("crash"):
		if s.say(ScriptedPrefix + "Crashing now with exit code 3, as the prompt asked.") {
			exit := s.m.Exit
			if exit == nil {
				exit = os.Exit
			}
			exit(3)
		}
		s.fail(errors.New("scripted crash: the process should have exited"))
	case has("fail"):
		if s.say(ScriptedPrefix + "Starting an answer that will fail…") {
			s.fail(errors.New("scripted failure: the prompt asked for one"))
		}
	case has("long"):
		if s.say(ScriptedPrefix + "This answer is long, so it stops at the length limit, right in the") {
			s.finish(StopLength)
		}
	case has("slow"):
		pace := s.m.SlowPace
		if pace <= 0 {
			pace = 50 * time.Millisecond
		}
		if !s.emit(Delta{Kind: DeltaText, Text: ScriptedPrefix + "Counting slowly:"}) {
			return
		}
		for i := 1; i <= slowDeltas; i++ {
			if !s.pause(pace) || !s.emit(Delta{Kind: DeltaText, Text: fmt.Sprintf(" %d", i)}) {
				return
			}
		}
		s.finish(StopStop)
	case has("ask"):
		s.dialog(req, agentproc.ExtensionUIRequest{Method: "confirm", Title: "Scripted question",
			Message: "The scripted model asks: shall I go on?"}, func(a DialogAnswer) string {
			switch {
			case a.Cancelled:
				return "You dismissed the question."
			case a.Confirmed:
				return "You answered yes."
			default:
				return "You answered no."
			}
		})
	case has("choose"):
		s.dialog(req, agentproc.ExtensionUIRequest{Method: "select", Title: "Choose a colour",
			Options: []string{"red", "green", "blue"}}, func(a DialogAnswer) string {
			if a.Cancelled {
				return "You chose nothing."
			}
			return "You chose: " + a.Value + "."
		})
	case isEcho:
		if !hasTool(req, "echo") {
			if s.say(ScriptedPrefix + "This agent has no echo tool, so I cannot echo “" + echoText + "”.") {
				s.finish(StopStop)
			}
			return
		}
		if s.say(ScriptedPrefix + "Calling the echo tool.") {
			s.callTool(callID, "echo", map[string]string{"text": echoText})
		}
	case has("increment"):
		if !hasTool(req, "increment") {
			if s.say(ScriptedPrefix + "This agent has no increment tool, so there is no counter to move.") {
				s.finish(StopStop)
			}
			return
		}
		if s.say(ScriptedPrefix + "Calling the increment tool.") {
			s.callTool(callID, "increment", map[string]any{})
		}
	default:
		quoted := prompt
		if utf8.RuneCountInString(quoted) > 200 {
			quoted = string([]rune(quoted)[:200]) + "…"
		}
		if s.say(ScriptedPrefix + "You said: “" + quoted + "”. I am a deterministic stand-in for a language model; " +
			"set SURFACED_LLM_BASE_URL and SURFACED_LLM_MODEL to talk to a real one. " +
			"Words that drive me: increment, echo: <text>, think, slow, ask, choose, fail, long, crash.") {
			s.finish(StopStop)
		}
	}
}

// dialog opens a dialog through req.UI and reports the answer.
func (s *script) dialog(req Request, ui agentproc.ExtensionUIRequest, describe func(DialogAnswer) string) {
	if req.UI == nil {
		if s.say(ScriptedPrefix + "I would open a " + ui.Method + " dialog, but no user interface is attached.") {
			s.finish(StopStop)
		}
		return
	}
	if !s.say(ScriptedPrefix + "Opening a " + ui.Method + " dialog. ") {
		return
	}
	ans, err := req.UI.Dialog(s.ctx, ui)
	if err != nil {
		s.fail(err)
		return
	}
	if s.say(describe(ans)) {
		s.finish(StopStop)
	}
}
