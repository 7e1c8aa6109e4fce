package acpgw

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	acp "github.com/coder/acp-go-sdk"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// dialogCall is an agent dialog put to the client as
// session/request_permission.
type dialogCall struct {
	callID  json.RawMessage
	method  string
	options []string
}

// ui puts an agent's dialog or notice to the editor: confirm and select as
// session/request_permission, setTitle as session_info_update; text
// dialogs are not for editors. A resolved dialog's request is withdrawn.
func (a *attachment) ui(ev *pb.UIRequestEvent) {
	r := struct {
		ID, Method, Title, Message string
		Options                    []string
		Resolved                   bool
	}{ev.GetId(), ev.GetMethod(), ev.GetTitle(), ev.GetMessage(), ev.GetOptions(), ev.GetResolved()}
	if r.Resolved {
		if d := a.dialogs[r.ID]; d != nil {
			delete(a.dialogs, r.ID)
			a.deliver(func() { a.conn.withdraw(d.callID) })
		}
		return
	}
	switch r.Method {
	case "setTitle":
		if r.Title != "" {
			t := r.Title
			a.update(acp.SessionUpdate{SessionInfoUpdate: &acp.SessionSessionInfoUpdate{Title: &t}})
		}
	case "input", "editor":
		// ACP has no way to ask for free text. When the turn is this
		// editor's own, nobody else is going to answer: cancel the dialog
		// (the agent hears cancelled) and say so in the conversation. A
		// turn someone else started is left to them (a browser answers it).
		if r.ID == "" || !a.ownTurn() {
			return
		}
		a.update(acp.UpdateAgentMessageText(fmt.Sprintf("\n\n⚠ The agent asked for text (%s%s), which this editor cannot show; the request was cancelled.",
			r.Method, titleSuffix(r.Title))))
		resp := &pb.UIResponse{Caller: a.caller, Id: r.ID, Which: "cancelled"}
		sid, rt, log := a.sessionID, a.srv.rt, a.srv.log
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), a.srv.opts.RequestTimeout)
			defer cancel()
			if _, err := rt.Request(ctx, sid, resp); err != nil {
				log.Warn("acp: cancelling a dialog the editor cannot show failed", "session", sid, "err", err)
			}
		}()
	case "confirm", "select":
		if r.ID == "" || a.dialogs[r.ID] != nil {
			return
		}
		d := &dialogCall{method: r.Method, options: r.Options}
		var options []acp.PermissionOption
		if r.Method == "confirm" {
			options = []acp.PermissionOption{
				{OptionId: "allow", Name: "Yes", Kind: acp.PermissionOptionKindAllowOnce},
				{OptionId: "reject", Name: "No", Kind: acp.PermissionOptionKindRejectOnce},
			}
		} else {
			if len(r.Options) == 0 {
				return
			}
			for i, o := range r.Options {
				options = append(options, acp.PermissionOption{OptionId: acp.PermissionOptionId("choice-" + strconv.Itoa(i)),
					Name: o, Kind: acp.PermissionOptionKindAllowOnce})
			}
		}
		title := r.Title
		if r.Message != "" {
			if title != "" {
				title += ": "
			}
			title += r.Message
		}
		if title == "" {
			title = "The agent asks"
		}
		kind := acp.ToolKindOther
		status := acp.ToolCallStatusPending
		params := acp.RequestPermissionRequest{SessionId: acp.SessionId(a.sessionID), Options: options,
			ToolCall: acp.ToolCallUpdate{ToolCallId: acp.ToolCallId("dialog-" + r.ID), Title: &title, Kind: &kind, Status: &status}}
		a.dialogs[r.ID] = d
		dialogID, self, root := r.ID, a.self, a.root
		a.deliver(func() {
			d.callID = a.conn.call(a.sessionID, "session/request_permission", params, func(res json.RawMessage, err *acp.RequestError) {
				root.Send(self, &permissionAnswer{dialogID: dialogID, result: res, err: err})
			})
		})
	}
}

func titleSuffix(title string) string {
	if title == "" {
		return ""
	}
	return ": " + title
}

// onPermission sends the client's choice to the agent as its dialog answer.
// Anything but a valid selection of an offered option is a cancel (fail
// closed).
func (a *attachment) onPermission(m *permissionAnswer) {
	d := a.dialogs[m.dialogID]
	if d == nil {
		return // answered elsewhere, or withdrawn
	}
	delete(a.dialogs, m.dialogID)
	resp := &pb.UIResponse{Caller: a.caller, Id: m.dialogID, Which: "cancelled"}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if m.err == nil && json.Unmarshal(m.result, &r) == nil && r.Outcome.Outcome == "selected" {
		switch {
		case d.method == "confirm" && (r.Outcome.OptionID == "allow" || r.Outcome.OptionID == "reject"):
			resp.Which, resp.Confirmed = "confirmed", r.Outcome.OptionID == "allow"
		case d.method == "select":
			for i, o := range d.options {
				if r.Outcome.OptionID == "choice-"+strconv.Itoa(i) {
					resp.Which, resp.Value = "value", o
				}
			}
		}
	}
	sid, rt, log, conn := a.sessionID, a.srv.rt, a.srv.log, a.conn
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), a.srv.opts.RequestTimeout)
		defer cancel()
		res, err := rt.Request(ctx, sid, resp)
		if err != nil {
			log.Warn("acp dialog answer did not reach the session", "connection", conn.id, "session", sid, "err", err)
			return
		}
		if r, ok := res.(*pb.UIResponseResult); ok && r.GetError() != nil {
			// Someone else answered first, or the turn ended.
			log.Debug("acp dialog answer refused", "session", sid, "code", r.GetError().GetCode())
		}
	}()
}

// withdrawDialogs withdraws every dialog request still open (the
// attachment ends).
func (a *attachment) withdrawDialogs() {
	for id, d := range a.dialogs {
		a.conn.withdraw(d.callID)
		delete(a.dialogs, id)
	}
}
