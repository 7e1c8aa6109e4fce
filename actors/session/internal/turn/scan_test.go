package turn

import (
	"encoding/json"
	"testing"
)

var scanSeeds = []string{
	`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"hi"}}`,
	`{"type":"message_update","message":{"role":"assistant","content":[{"type":"text","text":"a \"quoted\" \\ line\n"}]},"assistantMessageEvent":{"type":"text_delta","contentIndex":2,"delta":"x\ny\t\"z\" \u00e9 \ud83d\ude00 \ud800 \/","partial":{"content":[[],{},"}",1e5,-0.5,true,false,null]}}}`,
	`{"assistantMessageEvent":{"contentIndex":-3,"type":"thinking_delta","delta":"ü ok"}, "type":"message_update"}`,
	` { "assistantMessageEvent" : { "type" : "text_start" , "contentIndex" : 1 } } `,
	`{"assistantMessageEvent":null}`,
	`{"type":"message_update"}`,
	`{}`,
	`{"assistantMessageEvent":{}}`,
	`{"assistantMessageEvent":{"type":"error","reason":"error","error":{"errorMessage":"boom"}}}`,
	`{"assistantMessageEvent":{"type":"toolcall_end","contentIndex":1,"toolCall":{"type":"toolCall","id":"c","name":"n","arguments":{}}}}`,
	`{"assistantMessageEvent":{"Type":"text_delta","DELTA":"x"}}`,
	`{"AssistantMessageEvent":{"type":"text_delta","delta":"x"}}`,
	`{"assistantMessageEvent":{"type":"text_delta","delta":"a"},"assistantMessageEvent":{"delta":"b"}}`,
	`{"assistantMessageEvent":{"type":"text_delta","delta":"a","delta":"b","contentIndex":1,"contentIndex":2}}`,
	`{"assistantMessageEvent":{"type":"text_delta","contentIndex":1.0}}`,
	`{"assistantMessageEvent":{"type":"text_delta","contentIndex":1e2}}`,
	`{"assistantMessageEvent":{"type":"text_delta","contentIndex":"1"}}`,
	`{"assistantMessageEvent":{"type":"text_delta","contentIndex":99999999999999999999}}`,
	`{"assistantMessageEvent":{"type":"text_delta","delta":7}}`,
	`{"assistantMessageEvent":{"type":null,"delta":null}}`,
	`{"assistantMessageEvent":[1]}`,
	`{"assistantMessageEvent":"text_delta"}`,
	`{"assistantMessageEvent":{"type":"text_delta","delta":"bad utf8 \xff\xfe end"}}`,
	`{"assistantMessageEvent":{"typ\u0065":"text_delta","delta":"x"}}`,
	`{"assistantMessageEvent":{"type":"text_delta","ſ":1,"delta":"K"}}`,
	`{"assistantMessageEvent":{"reaſon":"x","reason":"aborted","type":"error"}}`,
	`[1,2]`,
	`"message_update"`,
}

// scanDecode is what encoding/json makes of a line: the reference.
func scanDecode(line []byte) (e assistantEvent, present bool, err error) {
	var u messageUpdateLine
	if err := json.Unmarshal(line, &u); err != nil {
		return e, false, err
	}
	if u.Event == nil {
		return e, false, nil
	}
	return *u.Event, true, nil
}

func sameEvent(a, b assistantEvent) bool {
	if a.Type != b.Type || a.ContentIndex != b.ContentIndex || a.Delta != b.Delta || a.Reason != b.Reason ||
		string(a.ToolCall) != string(b.ToolCall) || (a.Error == nil) != (b.Error == nil) {
		return false
	}
	return a.Error == nil || a.Error.ErrorMessage == b.Error.ErrorMessage
}

func checkScan(t *testing.T, line []byte) {
	if !json.Valid(line) {
		return // the agent codec never passes such a line on
	}
	var got assistantEvent
	present, ok := scanUpdate(line, &got)
	if !ok {
		return // the decoder reads it
	}
	want, wantPresent, err := scanDecode(line)
	if err != nil {
		t.Fatalf("%s: scanned (present %t, %+v) where encoding/json fails: %v", line, present, got, err)
	}
	if present != wantPresent || !sameEvent(got, want) {
		t.Fatalf("%s:\nscanned  %t %+v\ndecoded %t %+v", line, present, got, wantPresent, want)
	}
}

func TestScanUpdateAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range scanSeeds {
		checkScan(t, []byte(s))
	}
	// The lines of every day take the fast path.
	for _, s := range scanSeeds[:8] {
		var e assistantEvent
		if _, ok := scanUpdate([]byte(s), &e); !ok {
			t.Errorf("not scanned: %s", s)
		}
	}
	for _, s := range []string{scanSeeds[8], scanSeeds[9], scanSeeds[10], scanSeeds[11], scanSeeds[14], scanSeeds[18], scanSeeds[23]} {
		var e assistantEvent
		if _, ok := scanUpdate([]byte(s), &e); ok {
			t.Errorf("scanned, should have gone to the decoder: %s", s)
		}
	}
}

func FuzzScanUpdate(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkScan(t, line) })
}
