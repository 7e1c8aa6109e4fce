package turn

import (
	"encoding/json"
	"errors"

	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/plainjson"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// dialog is an agent dialog waiting for an answer.
type dialog struct {
	id     string
	method string
	turn   uint64 // the turn it was asked in; 0 outside a turn
}

// Errors for the session's invalid_line diagnostic.
var (
	errNoMethod        = errors.New("extension_ui_request without a method")
	errDialogWithoutID = errors.New("a dialog without an id cannot be answered")
)

// UIRequest takes an agent's extension_ui_request line. A dialog (select,
// confirm, input, editor) waits for UIResponse, sticky under "ui:<id>"
// until it is resolved; it is withdrawn when its turn ends or is aborted,
// or when the agent exits. Notices are emitted: setStatus and setWidget
// sticky per key, setTitle sticky (and it names the session), the others
// transient. A line without a method, or a dialog without an id, changes
// nothing and is answered with an error for the invalid_line diagnostic.
func (m *Machine) UIRequest(line []byte) error {
	var r proc.ExtensionUIRequest
	if err := json.Unmarshal(line, &r); err != nil || r.Method == "" {
		return errNoMethod
	}
	ev := pb.UIRequestOf(&pb.UIRequestEvent{Id: r.ID, Method: r.Method, Title: r.Title, Message: r.Message,
		Options: r.Options, Request: uiFrame(line)})
	switch {
	case proc.IsDialog(r.Method):
		if r.ID == "" {
			return errDialogWithoutID
		}
		var turnID uint64
		if m.cur != nil {
			turnID = m.cur.id
		}
		d := &dialog{id: r.ID, method: r.Method, turn: turnID}
		if i := m.dialogIndex(r.ID); i >= 0 {
			m.dialogs[i] = d // the agent asked again under the same id
		} else {
			m.dialogs = append(m.dialogs, d)
		}
		m.out.Emit(ev, "ui:"+r.ID)
	case r.Method == "setStatus":
		m.out.Emit(ev, "uistatus:"+r.StatusKey)
	case r.Method == "setWidget":
		m.out.Emit(ev, "uiwidget:"+r.WidgetKey)
	case r.Method == "setTitle":
		m.out.Emit(ev, "uititle")
		if r.Title != "" {
			m.out.Title(r.Title)
		}
	default:
		m.out.Emit(ev, "")
	}
	return nil
}

// uiFrame is the request as the agent sent it, without its line type.
func uiFrame(line []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return line
	}
	delete(m, "type")
	b, err := plainjson.Marshal(m)
	if err != nil {
		return line
	}
	return b
}

// UIResponse answers the dialog id for a client: which is "value" (an
// input's or a select's answer), "confirmed" (a confirm's), anything else
// cancels it. The agent gets the answer and every client learns the dialog
// is resolved. No dialog waiting with that id: unknown_ui_request.
func (m *Machine) UIResponse(id, which, value string, confirmed bool) *pb.Error {
	i := m.dialogIndex(id)
	if i < 0 {
		return pb.Err(CodeUnknownUI, "no agent dialog is waiting with that id")
	}
	d := m.dialogs[i]
	resp := proc.ExtensionUIResponse{Type: proc.TypeExtensionUIResponse, ID: d.id}
	switch which {
	case "value":
		resp.Value = &value
	case "confirmed":
		resp.Confirmed = &confirmed
	default:
		resp.Cancelled = true
	}
	m.send(resp, "")
	m.resolveDialog(i)
	return nil
}

func (m *Machine) dialogIndex(id string) int {
	for i, d := range m.dialogs {
		if d.id == id {
			return i
		}
	}
	return -1
}

// resolveDialog drops the dialog at i and tells the clients it is gone.
func (m *Machine) resolveDialog(i int) {
	d := m.dialogs[i]
	m.dialogs = append(m.dialogs[:i], m.dialogs[i+1:]...)
	m.out.Unstick("ui:" + d.id)
	m.out.Emit(pb.UIRequestOf(&pb.UIRequestEvent{Id: d.id, Method: d.method, Resolved: true}), "")
}

// cancelDialogs answers "cancelled" to the dialogs of a turn (0: all) that
// nobody answered, in the order they were asked, and tells the clients they
// are gone.
func (m *Machine) cancelDialogs(turnID uint64) {
	for i := 0; i < len(m.dialogs); {
		d := m.dialogs[i]
		if turnID != 0 && d.turn != turnID {
			i++
			continue
		}
		m.send(proc.ExtensionUIResponse{Type: proc.TypeExtensionUIResponse, ID: d.id, Cancelled: true}, "")
		m.resolveDialog(i)
	}
}
