package main

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"regexp"
	"strconv"
	"strings"

	"github.com/surfaced/surfaced/agentproc/agentkit"
)

// scriptedModel is the canvas's stand-in for a language model when no LLM is
// configured: deterministic, no network, and it says so. It reads the last
// user message: words that ask for a picture ("generate", "draw", "paint",
// "create", "imagine") call image_generate with the rest of the message as
// the prompt (and a size such as "512x512" if one is given); words that
// name an edit ("brighter", "rotate", "black and white", "blur", … see
// parseInstruction) call image_edit with the message as the instruction,
// on the image the conversation named last (an attachment, a surface-op, a
// tool's result) or else the current one. After a tool it reports the
// tool's answer; anything else gets a short help text.
type scriptedModel struct{}

// Info describes the model for get_state.
func (scriptedModel) Info() agentkit.ModelInfo {
	return agentkit.ModelInfo{ID: "scripted-canvas", Provider: "canvas-agent"}
}

var (
	attRE   = regexp.MustCompile(`att_[A-Za-z0-9_-]{6,}`)
	sizeRE  = regexp.MustCompile(`\b(\d{2,4})\s*[x×]\s*(\d{2,4})\b`)
	fenceRE = regexp.MustCompile("(?s)```surface-op\n(.*?)\n```")
)

var generateWords = []string{"generate", "draw", "paint", "create", "imagine", "render", "sketch"}

// Stream answers req deterministically.
func (scriptedModel) Stream(ctx context.Context, req agentkit.Request) iter.Seq2[agentkit.Delta, error] {
	return func(yield func(agentkit.Delta, error) bool) {
		say := func(text string) bool {
			return yield(agentkit.Delta{Kind: agentkit.DeltaText, Text: agentkit.ScriptedPrefix + text}, nil) &&
				yield(agentkit.Delta{Kind: agentkit.DeltaFinish, Reason: agentkit.StopStop}, nil)
		}
		call := func(name string, args any) {
			b, _ := json.Marshal(args)
			_ = yield(agentkit.Delta{Kind: agentkit.DeltaText, Text: agentkit.ScriptedPrefix + "Calling " + name + "."}, nil) &&
				yield(agentkit.Delta{Kind: agentkit.DeltaToolCall, ID: fmt.Sprintf("canvas-call-%d", len(req.Messages)), Name: name}, nil) &&
				yield(agentkit.Delta{Kind: agentkit.DeltaToolCallArgs, Text: string(b)}, nil) &&
				yield(agentkit.Delta{Kind: agentkit.DeltaFinish, Reason: agentkit.StopToolUse}, nil)
		}
		if err := ctx.Err(); err != nil {
			yield(agentkit.Delta{}, err)
			return
		}
		if len(req.Messages) == 0 {
			say("There is nothing to answer yet.")
			return
		}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == agentkit.RoleToolResult {
			if last.IsError {
				say("The " + last.ToolName + " tool failed: " + last.Text)
			} else {
				say(last.Text)
			}
			return
		}
		// agentkit appends the prompt's attachments to its text ("Attached
		// artifacts: - att_… (image/png)"); the request is what comes before.
		text := last.Text
		if i := strings.Index(text, "Attached artifacts:"); i >= 0 {
			text = text[:i]
		}
		lower := strings.ToLower(text)
		op, opParams := surfaceOp(text)
		if op == "canvas.discuss" {
			id := opParams["attachmentId"]
			if id == "" {
				id = lastAttachment(req.Messages)
			}
			say(fmt.Sprintf("I have %s in view now. Tell me what to do with it: make it brighter, rotate it, "+
				"make it black and white, blur it, or ask me to generate something new.", id))
			return
		}
		words := strings.FieldsFunc(lower, func(r rune) bool { return !(r >= 'a' && r <= 'z') })
		for _, w := range words {
			for _, g := range generateWords {
				if strings.HasPrefix(w, g) {
					w, h := defaultGenW, defaultGenH
					if m := sizeRE.FindStringSubmatch(lower); m != nil {
						w, _ = strconv.Atoi(m[1])
						h, _ = strconv.Atoi(m[2])
					}
					call("image_generate", GenerateArgs{Prompt: generationPrompt(text), Width: w, Height: h})
					return
				}
			}
		}
		if len(parseInstruction(text)) > 0 {
			args := EditArgs{AttachmentID: lastAttachment(req.Messages), Instruction: strings.TrimSpace(text)}
			call("image_edit", args)
			return
		}
		say("I am the canvas's stand-in model (set SURFACED_LLM_BASE_URL and SURFACED_LLM_MODEL for a real one). " +
			"Ask me to generate an image (\"draw a sunset over the sea\") or to edit the current one: " + instructionHelp + ".")
	}
}

// generationPrompt drops the request words: "please draw a red barn" → "a red barn".
func generationPrompt(text string) string {
	t := strings.TrimSpace(sizeRE.ReplaceAllString(text, ""))
	lower := strings.ToLower(t)
	for _, g := range generateWords {
		if i := strings.Index(lower, g); i >= 0 {
			rest := t[i+len(g):]
			// Skip the rest of the word ("generates", "drawing") and "me", "an image of".
			rest = strings.TrimLeft(rest, "abcdefghijklmnopqrstuvwxyz")
			rest = strings.TrimSpace(rest)
			for _, filler := range []string{"me ", "an image of ", "a picture of ", "an image ", "a picture ", "image of ", "picture of "} {
				if strings.HasPrefix(strings.ToLower(rest), filler) {
					rest = strings.TrimSpace(rest[len(filler):])
				}
			}
			if rest != "" {
				return strings.TrimRight(rest, ".!?")
			}
		}
	}
	return t
}

// lastAttachment is the artifact id the conversation mentioned last: an
// attachment, an id in a surface-op, or a tool's result ("the new image
// att_…"), so "make that last one brighter" edits it. "" when there is none
// (the tool then takes the current image).
func lastAttachment(msgs []agentkit.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if ids := attRE.FindAllString(msgs[i].Text, -1); len(ids) > 0 {
			if msgs[i].Role == agentkit.RoleToolResult {
				// A tool's answer names the source first and the new image last.
				return ids[len(ids)-1]
			}
			if _, p := surfaceOp(msgs[i].Text); p["attachmentId"] != "" {
				return p["attachmentId"]
			}
			return ids[len(ids)-1]
		}
	}
	return ""
}

// surfaceOp reads the surface-op block of a message the conversation bridge
// wrote: its tool and params.
func surfaceOp(text string) (string, map[string]string) {
	m := fenceRE.FindStringSubmatch(text)
	if m == nil {
		return "", nil
	}
	tool := ""
	params := map[string]string{}
	for _, line := range strings.Split(m[1], "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "tool" {
			tool = v
		} else {
			params[k] = v
		}
	}
	return tool, params
}
