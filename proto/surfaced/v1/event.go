package surfacedv1

import "strconv"

// Constructors of the session's events, so that an emitter names what it
// says in one call.

// ChatChunk is one of the *ChatEvent_… oneof values.
type ChatChunk = isChatEvent_Chunk

// ChatOf wraps one chat chunk (a *ChatEvent_… value) in an Event.
func ChatOf(chunk ChatChunk) *Event {
	return &Event{Event: &Event_Chat{Chat: &ChatEvent{Chunk: chunk}}}
}

// StateOf is a StateEvent; a deleted key carries no value.
func StateOf(key string, value []byte, rev uint64, deleted bool) *Event {
	if deleted {
		value = nil
	}
	return &Event{Event: &Event_State{State: &StateEvent{Key: key, Value: value, Rev: rev, Deleted: deleted}}}
}

// DiagnosticOf is a DiagnosticEvent.
func DiagnosticOf(code, message string) *Event {
	return &Event{Event: &Event_Diagnostic{Diagnostic: &DiagnosticEvent{Code: code, Message: message}}}
}

// EndOf is an EndEvent.
func EndOf(reason string) *Event {
	return &Event{Event: &Event_End{End: &EndEvent{Reason: reason}}}
}

// ResyncOf is a ResyncEvent.
func ResyncOf(reason string) *Event {
	return &Event{Event: &Event_Resync{Resync: &ResyncEvent{Reason: reason}}}
}

// StatusOf wraps a StatusEvent.
func StatusOf(s *StatusEvent) *Event { return &Event{Event: &Event_Status{Status: s}} }

// UIRequestOf wraps a UIRequestEvent.
func UIRequestOf(r *UIRequestEvent) *Event { return &Event{Event: &Event_UiRequest{UiRequest: r}} }

// Events of ArtifactEvent.
const (
	ArtifactAdded   = "added"
	ArtifactDeleted = "deleted"
)

// ArtifactOf is an ArtifactEvent: event is ArtifactAdded or ArtifactDeleted.
func ArtifactOf(event string, a *Artifact) *Event {
	return &Event{Event: &Event_Artifact{Artifact: &ArtifactEvent{Event: event, Artifact: a}}}
}

// Kinds of event: the name each one goes by wherever it is named (a
// browser frame's kind, a metric's label).
const (
	KindState      = "state"
	KindChat       = "chat"
	KindSession    = "session" // a StatusEvent
	KindUIRequest  = "ui-request"
	KindDiagnostic = "diagnostic"
	KindResync     = "resync"
	KindEnd        = "end"
	KindArtifact   = "artifact"
)

// KindOf is the kind of ev ("" for an empty event).
func KindOf(ev *Event) string {
	switch ev.GetEvent().(type) {
	case *Event_State:
		return KindState
	case *Event_Status:
		return KindSession
	case *Event_Chat:
		return KindChat
	case *Event_UiRequest:
		return KindUIRequest
	case *Event_Diagnostic:
		return KindDiagnostic
	case *Event_Resync:
		return KindResync
	case *Event_End:
		return KindEnd
	case *Event_Artifact:
		return KindArtifact
	}
	return ""
}

// TurnMessageID is the chat message id of a turn (TurnStart.message_id):
// unique for the life of a session because turn ids are.
func TurnMessageID(turnID uint64) string { return "turn-" + strconv.FormatUint(turnID, 10) }
