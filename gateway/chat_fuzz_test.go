package gateway

import (
	"errors"
	"strings"
	"testing"
)

// FuzzChatPrompt: any body decodes, loosely, into the chat body and its
// prompt without a panic, and the answer is either a prompt with text or a
// file, or an API error of status 400 that names a field when it blames
// one; a prompt's text is never more than the body holds.
func FuzzChatPrompt(f *testing.F) {
	for _, seed := range []string{
		`{"id":"c","trigger":"submit-message","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"hi"}]}]}`,
		`{"trigger":"regenerate-message","messageId":"turn-3","messages":[{"role":"user","parts":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","parts":[{"type":"tool-x","input":{}}]}]}`,
		`{"messages":[{"role":"user","parts":[{"type":"file","url":"data:image/png;base64,iVBORw0KGgo=","mediaType":"image/png"}]}]}`,
		`{"messages":[{"role":"user","parts":[{"type":"file","url":"/api/artifacts/att_x/content?sig=1","mediaType":"image/png","filename":"a.png"}]}]}`,
		`{"messages":[{"role":"user","parts":[{"type":"file","url":"data:,a%20b","mediaType":"text/plain"}]}]}`,
		`{"messages":[{"role":"user","parts":"x"}]}`,
		`{"messages":[]}`, `{"messages":null}`, `{}`, `[]`, `{"messages":[{"role":1}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var body chatBody
		if err := decodeJSONWith(data, &body, false); err != nil {
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != 400 {
				t.Fatalf("decode error %v is not a 400", err)
			}
			return
		}
		p, err := body.prompt("s1")
		if err != nil {
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Code == "" || ae.Message == "" {
				t.Fatalf("prompt error %#v is not a 400 API error", err)
			}
			return
		}
		if strings.TrimSpace(p.text) == "" && len(p.files) == 0 {
			t.Fatalf("an empty prompt was accepted from %q", data)
		}
		if len(p.text) > len(data) {
			t.Fatalf("prompt text %d bytes from a %d-byte body", len(p.text), len(data))
		}
		for _, fl := range p.files {
			if fl.artifact != "" && fl.data != nil || fl.artifact == "" && fl.data == nil {
				t.Fatalf("file %+v is not either bytes or an artifact", fl)
			}
			if fl.mediaType == "" || fl.field == "" {
				t.Fatalf("file %+v lacks its media type or field", fl)
			}
		}
	})
}
