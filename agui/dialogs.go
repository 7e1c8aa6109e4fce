package agui

import (
	"encoding/json"
	"fmt"
	"slices"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// An agent's dialog (pi's extension_ui_request select, confirm, input,
// editor) during a run's turn ends the run with AG-UI's interrupt outcome:
// RUN_FINISHED {outcome: {type: "interrupt", interrupts: [...]}}, one
// interrupt per dialog waiting for an answer. The turn waits in the
// session; the next run's resume entries answer the dialogs (as a
// browser's POST …/ui-response does) and stream the rest of the turn.

// IsDialog reports whether a ui-request method waits for an answer.
func IsDialog(method string) bool {
	switch method {
	case "select", "confirm", "input", "editor":
		return true
	}
	return false
}

// Interrupt is a dialog as an AG-UI interrupt.
type Interrupt struct {
	ID      string
	Method  string
	Title   string
	Message string
	Options []string
}

func (r *Renderer) uiRequest(u *pb.UIRequestEvent) {
	i := slices.IndexFunc(r.interrupts, func(x Interrupt) bool { return x.ID == u.GetId() })
	if u.GetResolved() {
		if i >= 0 {
			r.interrupts = slices.Delete(r.interrupts, i, i+1)
		}
		return
	}
	if i >= 0 || !IsDialog(u.GetMethod()) {
		return
	}
	r.interrupts = append(r.interrupts, Interrupt{ID: u.GetId(), Method: u.GetMethod(), Title: u.GetTitle(),
		Message: u.GetMessage(), Options: u.GetOptions()})
}

// appendInterruptOutcome appends {"type":"interrupt","interrupts":[...]}.
func appendInterruptOutcome(dst []byte, is []Interrupt) []byte {
	dst = append(dst, `{"type":"interrupt","interrupts":[`...)
	for n, i := range is {
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = appendInterrupt(dst, i)
	}
	return append(dst, `]}`...)
}

// appendInterrupt: {id, reason, message?, responseSchema, metadata}. The
// reason is the dialog's method; message is its title, and its message
// after a blank line; responseSchema is the JSON Schema of the payload of a
// resolved resume entry, the body POST …/ui-response takes without its id:
// {"confirmed": bool} for confirm, {"value": "…"} otherwise (one of the
// options for select). metadata.surfaced has the dialog as the session
// shows it (method, title, message, options).
func appendInterrupt(dst []byte, i Interrupt) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, i.ID)
	dst = append(dst, `,"reason":`...)
	dst = appendString(dst, i.Method)
	msg := i.Title
	if i.Message != "" {
		if msg != "" {
			msg += "\n\n"
		}
		msg += i.Message
	}
	if msg != "" {
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, msg)
	}
	dst = append(dst, `,"responseSchema":`...)
	dst = appendResponseSchema(dst, i)
	dst = append(dst, `,"metadata":{"surfaced":{"method":`...)
	dst = appendString(dst, i.Method)
	if i.Title != "" {
		dst = append(dst, `,"title":`...)
		dst = appendString(dst, i.Title)
	}
	if i.Message != "" {
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, i.Message)
	}
	if len(i.Options) > 0 {
		dst = append(dst, `,"options":`...)
		dst = appendStrings(dst, i.Options)
	}
	return append(dst, `}}}`...)
}

func appendResponseSchema(dst []byte, i Interrupt) []byte {
	if i.Method == "confirm" {
		return append(dst, `{"type":"object","properties":{"confirmed":{"type":"boolean"}},"required":["confirmed"],"additionalProperties":false}`...)
	}
	dst = append(dst, `{"type":"object","properties":{"value":{"type":"string"`...)
	if i.Method == "select" && len(i.Options) > 0 {
		dst = append(dst, `,"enum":`...)
		dst = appendStrings(dst, i.Options)
	}
	return append(dst, `}},"required":["value"],"additionalProperties":false}`...)
}

// Answer is a resume entry as the session's UIResponse takes it: which is
// value, confirmed or cancelled.
type Answer struct {
	ID        string
	Which     string
	Value     string
	Confirmed bool
}

// AnswerOf reads a resume entry: cancelled, or resolved with the payload
// an interrupt's responseSchema describes ({"confirmed": bool} or
// {"value": "…"}, exactly one).
func AnswerOf(e ResumeEntry) (Answer, error) {
	a := Answer{ID: e.InterruptID}
	if e.Status == "cancelled" {
		a.Which = "cancelled"
		return a, nil
	}
	f := e.Field + ".payload"
	if e.Payload == nil {
		return Answer{}, fieldErr(f, `is required when status is "resolved": {"value": "…"} (select, input, editor) or {"confirmed": true|false} (confirm), as the interrupt's responseSchema says`)
	}
	obj, err := object(e.Payload, f)
	if err != nil {
		return Answer{}, err
	}
	var n int
	if raw, ok := obj["value"]; ok {
		n++
		a.Which = "value"
		if a.Value, err = stringOf(raw, f+".value"); err != nil {
			return Answer{}, err
		}
	}
	if raw, ok := obj["confirmed"]; ok {
		n++
		a.Which = "confirmed"
		if err := json.Unmarshal(raw, &a.Confirmed); err != nil || isNull(raw) {
			return Answer{}, fieldErr(f+".confirmed", "must be true or false")
		}
	}
	if n != 1 || len(obj) != 1 {
		return Answer{}, fieldErr(f, `must be exactly {"value": "…"} or {"confirmed": true|false}`)
	}
	return a, nil
}

// String is for logs.
func (a Answer) String() string { return fmt.Sprintf("%s:%s", a.ID, a.Which) }
