package agui

import (
	"encoding/json"
	"strconv"
	"strings"
)

// AG-UI 1.0 event types (EventType of @ag-ui/core).
const (
	EventRunStarted              = "RUN_STARTED"
	EventRunFinished             = "RUN_FINISHED"
	EventRunError                = "RUN_ERROR"
	EventStateSnapshot           = "STATE_SNAPSHOT"
	EventStateDelta              = "STATE_DELTA"
	EventTextMessageStart        = "TEXT_MESSAGE_START"
	EventTextMessageContent      = "TEXT_MESSAGE_CONTENT"
	EventTextMessageEnd          = "TEXT_MESSAGE_END"
	EventReasoningStart          = "REASONING_START"
	EventReasoningMessageStart   = "REASONING_MESSAGE_START"
	EventReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	EventReasoningMessageEnd     = "REASONING_MESSAGE_END"
	EventReasoningEnd            = "REASONING_END"
	EventToolCallStart           = "TOOL_CALL_START"
	EventToolCallArgs            = "TOOL_CALL_ARGS"
	EventToolCallEnd             = "TOOL_CALL_END"
	EventToolCallResult          = "TOOL_CALL_RESULT"
)

// The events are encoded by hand, appending to a buffer without reflection
// (they run once per frame on the delivery path), with the rule of
// @ag-ui/encoder: an optional field that has no value is left out, never
// null. Each appender writes one JSON object.

// event opens an event object: {"type":"<typ>"
func event(dst []byte, typ string) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...)
	return append(dst, '"')
}

// field appends ,"name":"<value>" (value escaped).
func field(dst []byte, name, value string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return appendString(dst, value)
}

// rawField appends ,"name":<raw JSON>.
func rawField(dst []byte, name string, raw []byte) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return append(dst, raw...)
}

// withID is an event that names one message or tool call:
// {"type":"<typ>","<key>":"<id>"}.
func withID(dst []byte, typ, key, id string) []byte {
	return append(field(event(dst, typ), key, id), '}')
}

// runStarted: RUN_STARTED, with the session in metadata.surfaced.sessionId
// (the id a client aborts the turn with, or drives the session's surfaces
// through).
func runStarted(dst []byte, threadID, runID, sessionID string) []byte {
	dst = event(dst, EventRunStarted)
	dst = field(dst, "threadId", threadID)
	dst = field(dst, "runId", runID)
	dst = append(dst, `,"metadata":{"surfaced":{"sessionId":`...)
	dst = appendString(dst, sessionID)
	return append(dst, `}}}`...)
}

// runFinished: RUN_FINISHED; outcome, when set, is the outcome object's
// JSON; turnID and stopReason (when the run streamed a turn) go in
// metadata.surfaced.
func runFinished(dst []byte, threadID, runID string, outcome []byte, turnID uint64, stopReason string) []byte {
	dst = event(dst, EventRunFinished)
	dst = field(dst, "threadId", threadID)
	dst = field(dst, "runId", runID)
	if outcome != nil {
		dst = rawField(dst, "outcome", outcome)
	}
	if turnID != 0 {
		dst = append(dst, `,"metadata":{"surfaced":{"turnId":`...)
		dst = strconv.AppendUint(dst, turnID, 10)
		if stopReason != "" {
			dst = field(dst, "stopReason", stopReason)
		}
		dst = append(dst, `}}`...)
	}
	return append(dst, '}')
}

// runError: RUN_ERROR with its code.
func runError(dst []byte, message, code string) []byte {
	dst = event(dst, EventRunError)
	dst = field(dst, "message", message)
	if code != "" {
		dst = field(dst, "code", code)
	}
	return append(dst, '}')
}

// delta appends a message's or a tool call's fragment:
// {"type":"<typ>","<key>":"<id>","delta":"<text>"}.
func delta(dst []byte, typ, key, id, text string) []byte {
	dst = field(event(dst, typ), key, id)
	return append(field(dst, "delta", text), '}')
}

func textStart(dst []byte, messageID string) []byte {
	dst = field(event(dst, EventTextMessageStart), "messageId", messageID)
	return append(dst, `,"role":"assistant"}`...)
}

func reasoningMessageStart(dst []byte, messageID string) []byte {
	dst = field(event(dst, EventReasoningMessageStart), "messageId", messageID)
	return append(dst, `,"role":"reasoning"}`...)
}

func toolCallStart(dst []byte, toolCallID, name, parentMessageID string) []byte {
	dst = event(dst, EventToolCallStart)
	dst = field(dst, "toolCallId", toolCallID)
	dst = field(dst, "toolCallName", name)
	if parentMessageID != "" {
		dst = field(dst, "parentMessageId", parentMessageID)
	}
	return append(dst, '}')
}

// toolCallResult: TOOL_CALL_RESULT, a tool message of its own (messageId).
// errorCode, when set, marks a failed call: metadata.surfaced.error.
func toolCallResult(dst []byte, messageID, toolCallID, content, errorCode string) []byte {
	dst = event(dst, EventToolCallResult)
	dst = field(dst, "messageId", messageID)
	dst = field(dst, "toolCallId", toolCallID)
	dst = field(dst, "content", content)
	dst = append(dst, `,"role":"tool"`...)
	if errorCode != "" {
		dst = append(dst, `,"metadata":{"surfaced":{"error":`...)
		dst = appendString(dst, errorCode)
		dst = append(dst, `}}`...)
	}
	return append(dst, '}')
}

// stateSnapshot: STATE_SNAPSHOT of the state's JSON.
func stateSnapshot(dst []byte, snapshot []byte) []byte {
	return append(rawField(event(dst, EventStateSnapshot), "snapshot", snapshot), '}')
}

// stateDelta: STATE_DELTA of a JSON Patch (an array of operations).
func stateDelta(dst []byte, patch []byte) []byte {
	return append(rawField(event(dst, EventStateDelta), "delta", patch), '}')
}

// toolContent is a tool result as TOOL_CALL_RESULT's string content: the
// text of a result in the agent protocol's shape ({"content": [text
// parts], ...}: the texts, one per line), a JSON string's value, any other
// JSON as its text ("null" for none).
func toolContent(output []byte) string {
	if len(output) == 0 {
		return "null"
	}
	switch output[0] {
	case '"':
		var s string
		if json.Unmarshal(output, &s) == nil {
			return s
		}
	case '{':
		var r struct {
			Content []struct {
				Type string  `json:"type"`
				Text *string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(output, &r) == nil && len(r.Content) > 0 {
			texts := make([]string, 0, len(r.Content))
			for _, c := range r.Content {
				if c.Type != "text" || c.Text == nil {
					return string(output) // not text alone: the whole result
				}
				texts = append(texts, *c.Text)
			}
			return strings.Join(texts, "\n")
		}
	}
	return string(output)
}
