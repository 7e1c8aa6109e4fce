// Package wire renders a session's typed events into the browser's wire
// format: a frame kind and its JSON data, the same for SSE (event:/data:)
// and WebSocket ({"event","id","data"}). Chat events become AI SDK UI message
// stream chunks (v1). ACP renders the same events its own way (package
// acpgw); neither parses the other's output.
//
// Rendering appends to a caller's buffer without reflection: it runs once per
// frame per client on the delivery path.
package wire

import (
	"strconv"
	"time"
	"unicode/utf8"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// Data renders ev's JSON data.
func Data(ev *pb.Event) []byte { return AppendData(nil, ev) }

// AppendData appends ev's JSON data to dst.
func AppendData(dst []byte, ev *pb.Event) []byte {
	switch e := ev.GetEvent().(type) {
	case *pb.Event_State:
		return appendState(dst, e.State)
	case *pb.Event_Status:
		return appendStatus(dst, e.Status)
	case *pb.Event_Chat:
		return AppendChunk(dst, e.Chat)
	case *pb.Event_UiRequest:
		return appendUIRequest(dst, e.UiRequest)
	case *pb.Event_Diagnostic:
		dst = append(dst, `{"code":`...)
		dst = AppendString(dst, e.Diagnostic.GetCode())
		dst = append(dst, `,"message":`...)
		dst = AppendString(dst, e.Diagnostic.GetMessage())
		return append(dst, '}')
	case *pb.Event_Resync:
		return appendReason(dst, e.Resync.GetReason())
	case *pb.Event_End:
		return appendReason(dst, e.End.GetReason())
	case *pb.Event_Artifact:
		dst = append(dst, `{"event":`...)
		dst = AppendString(dst, e.Artifact.GetEvent())
		dst = append(dst, `,"artifact":`...)
		dst = AppendArtifact(dst, e.Artifact.GetArtifact())
		return append(dst, '}')
	}
	return append(dst, "{}"...)
}

// AppendArtifact appends an artifact's JSON, as the HTTP API and the
// artifact frame carry it: {id, sessionId, mediaType, size, sha256, name?,
// createdAt, derivedFrom?, meta?}, createdAt in RFC 3339 (UTC).
func AppendArtifact(dst []byte, a *pb.Artifact) []byte {
	dst = append(dst, `{"id":`...)
	dst = AppendString(dst, a.GetId())
	dst = append(dst, `,"sessionId":`...)
	dst = AppendString(dst, a.GetSessionId())
	dst = append(dst, `,"mediaType":`...)
	dst = AppendString(dst, a.GetMediaType())
	dst = append(dst, `,"size":`...)
	dst = strconv.AppendInt(dst, a.GetSize(), 10)
	dst = append(dst, `,"sha256":`...)
	dst = AppendString(dst, a.GetSha256())
	dst = appendOptString(dst, "name", a.GetName())
	dst = append(dst, `,"createdAt":"`...)
	dst = time.UnixMilli(a.GetCreatedAtMs()).UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	dst = appendOptString(dst, "derivedFrom", a.GetDerivedFrom())
	if len(a.GetMeta()) > 0 {
		dst = append(dst, `,"meta":`...)
		dst = append(dst, a.GetMeta()...)
	}
	return append(dst, '}')
}

func appendReason(dst []byte, reason string) []byte {
	dst = append(dst, `{"reason":`...)
	dst = AppendString(dst, reason)
	return append(dst, '}')
}

func appendState(dst []byte, s *pb.StateEvent) []byte {
	dst = append(dst, `{"key":`...)
	dst = AppendString(dst, s.GetKey())
	if !s.GetDeleted() && len(s.GetValue()) > 0 {
		dst = append(dst, `,"value":`...)
		dst = append(dst, s.GetValue()...)
	}
	dst = append(dst, `,"rev":`...)
	dst = strconv.AppendUint(dst, s.GetRev(), 10)
	if s.GetDeleted() {
		dst = append(dst, `,"deleted":true`...)
	}
	return append(dst, '}')
}

func appendStatus(dst []byte, s *pb.StatusEvent) []byte {
	dst = append(dst, `{"status":`...)
	dst = AppendString(dst, s.GetStatus())
	dst = append(dst, `,"busy":`...)
	dst = strconv.AppendBool(dst, s.GetBusy())
	dst = appendOptString(dst, "code", s.GetCode())
	dst = appendOptString(dst, "detail", s.GetDetail())
	dst = appendOptString(dst, "title", s.GetTitle())
	dst = append(dst, `,"queued":`...)
	dst = strconv.AppendUint(dst, uint64(s.GetQueued()), 10)
	dst = append(dst, `,"images":`...)
	dst = strconv.AppendBool(dst, s.GetImages())
	// Every session frame lists the surfaces, none included: a client
	// replaces what it knew, so a frame without them would leave a domain
	// of a session that ended looking available.
	dst = append(dst, `,"surfaces":[`...)
	for i, d := range s.GetSurfaces() {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"domain":`...)
		dst = AppendString(dst, d.GetDomain())
		dst = append(dst, `,"hosted":`...)
		dst = AppendString(dst, d.GetHosted())
		dst = append(dst, `,"available":`...)
		dst = strconv.AppendBool(dst, d.GetAvailable())
		dst = append(dst, `,"commands":[`...)
		for j, c := range d.GetCommands() {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, c)
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}"...)
}

func appendUIRequest(dst []byte, r *pb.UIRequestEvent) []byte {
	if r.GetResolved() {
		dst = append(dst, `{"id":`...)
		dst = AppendString(dst, r.GetId())
		dst = append(dst, `,"method":`...)
		dst = AppendString(dst, r.GetMethod())
		return append(dst, `,"resolved":true}`...)
	}
	if len(r.GetRequest()) > 0 {
		return append(dst, r.GetRequest()...)
	}
	dst = append(dst, `{"id":`...)
	dst = AppendString(dst, r.GetId())
	dst = append(dst, `,"method":`...)
	dst = AppendString(dst, r.GetMethod())
	return append(dst, '}')
}

// AppendChunk appends the UI message chunk of a chat event.
func AppendChunk(dst []byte, c *pb.ChatEvent) []byte {
	switch e := c.GetChunk().(type) {
	case *pb.ChatEvent_PartDelta:
		dst = appendType(dst, partType(e.PartDelta.GetKind(), "delta"))
		dst = append(dst, `,"id":`...)
		dst = AppendString(dst, e.PartDelta.GetId())
		dst = append(dst, `,"delta":`...)
		dst = AppendString(dst, e.PartDelta.GetDelta())
		return append(dst, '}')
	case *pb.ChatEvent_PartStart:
		dst = appendType(dst, partType(e.PartStart.GetKind(), "start"))
		dst = append(dst, `,"id":`...)
		dst = AppendString(dst, e.PartStart.GetId())
		return append(dst, '}')
	case *pb.ChatEvent_PartEnd:
		dst = appendType(dst, partType(e.PartEnd.GetKind(), "end"))
		dst = append(dst, `,"id":`...)
		dst = AppendString(dst, e.PartEnd.GetId())
		return append(dst, '}')
	case *pb.ChatEvent_UserMessage:
		u := e.UserMessage
		dst = append(dst, `{"type":"data-user-message","data":{"promptId":`...)
		dst = strconv.AppendUint(dst, u.GetPromptId(), 10)
		dst = append(dst, `,"text":`...)
		dst = AppendString(dst, u.GetText())
		dst = appendOptString(dst, "via", u.GetVia())
		dst = appendOptString(dst, "tag", u.GetTag())
		dst = append(dst, `,"queued":`...)
		dst = strconv.AppendBool(dst, u.GetQueued())
		if u.GetImages() > 0 {
			dst = append(dst, `,"images":`...)
			dst = strconv.AppendUint(dst, uint64(u.GetImages()), 10)
		}
		if ids := u.GetAttachmentIds(); len(ids) > 0 {
			dst = append(dst, `,"attachmentIds":[`...)
			for i, id := range ids {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = AppendString(dst, id)
			}
			dst = append(dst, ']')
		}
		return append(dst, "}}"...)
	case *pb.ChatEvent_TurnStart:
		t := e.TurnStart
		id := t.GetMessageId()
		if id == "" {
			id = pb.TurnMessageID(t.GetTurnId())
		}
		dst = append(dst, `{"type":"start","messageId":`...)
		dst = AppendString(dst, id)
		dst = append(dst, `,"messageMetadata":{"turnId":`...)
		dst = strconv.AppendUint(dst, t.GetTurnId(), 10)
		dst = append(dst, `,"promptIds":`...)
		dst = appendUints(dst, t.GetPromptIds())
		return append(dst, "}}"...)
	case *pb.ChatEvent_TurnFinish:
		t := e.TurnFinish
		dst = append(dst, `{"type":"finish","messageMetadata":{"turnId":`...)
		dst = strconv.AppendUint(dst, t.GetTurnId(), 10)
		dst = append(dst, `,"promptIds":`...)
		dst = appendUints(dst, t.GetPromptIds())
		dst = append(dst, `,"stopReason":`...)
		dst = AppendString(dst, t.GetStopReason())
		return append(dst, "}}"...)
	case *pb.ChatEvent_StepStart:
		return append(dst, `{"type":"start-step"}`...)
	case *pb.ChatEvent_StepFinish:
		return append(dst, `{"type":"finish-step"}`...)
	case *pb.ChatEvent_ToolInputStart:
		dst = append(dst, `{"type":"tool-input-start","toolCallId":`...)
		dst = AppendString(dst, e.ToolInputStart.GetToolCallId())
		dst = append(dst, `,"toolName":`...)
		dst = AppendString(dst, e.ToolInputStart.GetToolName())
		return append(dst, '}')
	case *pb.ChatEvent_ToolInputDelta:
		dst = append(dst, `{"type":"tool-input-delta","toolCallId":`...)
		dst = AppendString(dst, e.ToolInputDelta.GetToolCallId())
		dst = append(dst, `,"inputTextDelta":`...)
		dst = AppendString(dst, e.ToolInputDelta.GetDelta())
		return append(dst, '}')
	case *pb.ChatEvent_ToolInput:
		dst = append(dst, `{"type":"tool-input-available","toolCallId":`...)
		dst = AppendString(dst, e.ToolInput.GetToolCallId())
		dst = append(dst, `,"toolName":`...)
		dst = AppendString(dst, e.ToolInput.GetToolName())
		dst = append(dst, `,"input":`...)
		dst = appendRaw(dst, e.ToolInput.GetInput(), "{}")
		return append(dst, '}')
	case *pb.ChatEvent_ToolOutput:
		dst = append(dst, `{"type":"tool-output-available","toolCallId":`...)
		dst = AppendString(dst, e.ToolOutput.GetToolCallId())
		dst = append(dst, `,"output":`...)
		dst = appendRaw(dst, e.ToolOutput.GetOutput(), "null")
		if e.ToolOutput.GetPreliminary() {
			dst = append(dst, `,"preliminary":true`...)
		}
		return append(dst, '}')
	case *pb.ChatEvent_ToolError:
		dst = append(dst, `{"type":"tool-output-error","toolCallId":`...)
		dst = AppendString(dst, e.ToolError.GetToolCallId())
		dst = append(dst, `,"errorText":`...)
		dst = AppendString(dst, e.ToolError.GetErrorText())
		return append(dst, '}')
	case *pb.ChatEvent_TurnError:
		dst = append(dst, `{"type":"error","errorText":`...)
		dst = AppendString(dst, e.TurnError.GetErrorText())
		return append(dst, '}')
	case *pb.ChatEvent_TurnAbort:
		return append(dst, `{"type":"abort"}`...)
	case *pb.ChatEvent_AgentNotice:
		dst = append(dst, `{"type":"data-agent-event","data":`...)
		dst = appendRaw(dst, e.AgentNotice.GetLine(), "null")
		return append(dst, `,"transient":true}`...)
	}
	return append(dst, `{}`...)
}

func partType(k pb.PartKind, what string) string {
	if k == pb.PartKind_PART_KIND_REASONING {
		return "reasoning-" + what
	}
	return "text-" + what
}

func appendType(dst []byte, typ string) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...)
	return append(dst, '"')
}

func appendOptString(dst []byte, name, v string) []byte {
	if v == "" {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return AppendString(dst, v)
}

func appendRaw(dst, raw []byte, empty string) []byte {
	if len(raw) == 0 {
		return append(dst, empty...)
	}
	return append(dst, raw...)
}

func appendUints(dst []byte, vs []uint64) []byte {
	dst = append(dst, '[')
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, v, 10)
	}
	return append(dst, ']')
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. It escapes what JSON requires
// (quote, backslash, control characters), U+2028 and U+2029 (so the text is
// safe inside a JavaScript line too) and invalid UTF-8 (as U+FFFD), and
// nothing else: no HTML escaping, which would make "<" six bytes.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
