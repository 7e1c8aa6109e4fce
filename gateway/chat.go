package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/delivery"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// The per-turn chat endpoint: the AI SDK's stock DefaultChatTransport (what
// useChat uses) talks to a session through it.
//
//	POST /api/sessions/{id}/chat         the last user message is the prompt;
//	                                     the answer streams the turn that answers it
//	GET  /api/sessions/{id}/chat/stream  the running turn from its start (resume)
//
// Both are UI message streams (v1): one "data: <chunk>" event per chunk,
// "data: [DONE]" after the turn's finish. The chunks are those of the
// session stream (internal/wire renders both), data-user-message excepted.
// Each stream is a subscriber like every client (turnSink keeps one turn of
// the session's frames) drained by the delivery writer into chatTransport.

// Triggers of the chat body.
const (
	triggerSubmit     = "submit-message"
	triggerRegenerate = "regenerate-message"
)

// chatBody is the body DefaultChatTransport sends: the chat's id, its
// messages, the trigger and (regenerate-message) the id of the message to
// answer again, with the app's own fields beside them, which are ignored.
// So are the chat's id and the earlier messages: the session keeps its own
// history, and the client's copy is a view of it.
type chatBody struct {
	Messages *[]chatMessage `json:"messages"`
	Trigger  *string        `json:"trigger"`
}

// chatMessage is a UIMessage as far as the endpoint reads it; only the
// parts of the last user message are decoded.
type chatMessage struct {
	Role  string          `json:"role"`
	Parts json.RawMessage `json:"parts"`
}

// chatPart is a part of the user message: text and file parts are read,
// the others (data, sources, step markers) are ignored.
type chatPart struct {
	Type      *string `json:"type"`
	Text      *string `json:"text"`
	URL       *string `json:"url"`
	MediaType *string `json:"mediaType"`
	Filename  *string `json:"filename"`
}

// chatFile is a file part of the prompt: bytes from a data: URL to store as
// an artifact of the session, or one of the session's artifacts by id.
type chatFile struct {
	field     string // where it was in the body, for errors
	mediaType string
	filename  string
	data      []byte // a data: URL's bytes
	artifact  string // an artifact of the session (att_…)
}

// chatPrompt is what the chat body asks the session.
type chatPrompt struct {
	text  string
	files []chatFile
}

// prompt reads the prompt from the body: the last user message's text
// parts joined by blank lines, and its file parts.
func (b *chatBody) prompt(sessionID string) (chatPrompt, error) {
	if b.Trigger != nil && *b.Trigger != triggerSubmit && *b.Trigger != triggerRegenerate {
		return chatPrompt{}, fieldErr("trigger", fmt.Sprintf("trigger must be %q or %q", triggerSubmit, triggerRegenerate))
	}
	if b.Messages == nil {
		return chatPrompt{}, fieldErr("messages", "messages is required: the chat's messages, the last user message being the prompt")
	}
	msgs := *b.Messages
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			last = i
			break
		}
	}
	if last < 0 {
		return chatPrompt{}, apiErr(http.StatusBadRequest, codes.NoUserMessage, "messages has no message with role \"user\": the last one is the prompt", "messages")
	}
	base := fmt.Sprintf("messages[%d].parts", last)
	var parts []chatPart
	if err := json.Unmarshal(msgs[last].Parts, &parts); err != nil || msgs[last].Parts == nil {
		return chatPrompt{}, fieldErr(base, base+" must be an array of message parts")
	}
	var p chatPrompt
	var texts []string
	for j, part := range parts {
		field := fmt.Sprintf("%s[%d]", base, j)
		if part.Type == nil {
			return chatPrompt{}, fieldErr(field+".type", field+".type is required")
		}
		switch *part.Type {
		case "text":
			if part.Text == nil {
				return chatPrompt{}, fieldErr(field+".text", field+".text is required in a text part")
			}
			if *part.Text != "" {
				texts = append(texts, *part.Text)
			}
		case "file":
			f, err := fileOf(field, part, sessionID)
			if err != nil {
				return chatPrompt{}, err
			}
			p.files = append(p.files, f)
		}
	}
	p.text = strings.Join(texts, "\n\n")
	if strings.TrimSpace(p.text) == "" && len(p.files) == 0 {
		return chatPrompt{}, apiErr(http.StatusBadRequest, codes.EmptyPrompt,
			fmt.Sprintf("messages[%d], the last user message, has no text and no file", last), base)
	}
	return p, nil
}

// fileOf reads a file part: a data: URL, or the URL of one of the
// session's artifacts.
func fileOf(field string, part chatPart, sessionID string) (chatFile, error) {
	if part.URL == nil || *part.URL == "" {
		return chatFile{}, fieldErr(field+".url", field+".url is required in a file part")
	}
	if part.MediaType == nil || *part.MediaType == "" {
		return chatFile{}, fieldErr(field+".mediaType", field+".mediaType is required in a file part")
	}
	f := chatFile{field: field, mediaType: *part.MediaType}
	if part.Filename != nil {
		f.filename = *part.Filename
	}
	raw := *part.URL
	if rest, ok := cutPrefixFold(raw, "data:"); ok {
		data, err := decodeDataURL(rest)
		if err != nil {
			return chatFile{}, fieldErr(field+".url", fmt.Sprintf("%s.url is not a valid data: URL: %v", field, err))
		}
		f.data = data
		return f, nil
	}
	att, ok := artifact.IDOfURL(raw, sessionID)
	if !ok {
		if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Scheme != "data" {
			// The daemon fetches nothing on a client's word: no request to
			// an address a client chose leaves it.
			return chatFile{}, fieldErr(field+".url", fmt.Sprintf(
				"%s.url is a %s: URL, and the daemon does not download files: send the bytes as a data: URL, or upload them (POST /api/sessions/{id}/artifacts) and send the url it answers",
				field, clipScheme(u.Scheme)))
		}
		return chatFile{}, fieldErr(field+".url", field+".url must be a data: URL or the URL of one of this session's artifacts")
	}
	f.artifact = att
	return f, nil
}

// clipScheme keeps an error message short whatever a client sent.
func clipScheme(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// decodeDataURL decodes what follows "data:": [<media type>][;base64],<data>
// (RFC 2397). The media type is the part's own (mediaType), not this one.
func decodeDataURL(rest string) ([]byte, error) {
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("no comma before the data")
	}
	isBase64 := false
	if m, ok := cutSuffixFold(meta, ";base64"); ok {
		isBase64, meta = true, m
	}
	if meta != "" {
		if _, _, err := mime.ParseMediaType(meta); err != nil {
			return nil, fmt.Errorf("media type %q: %v", meta, err)
		}
	}
	if isBase64 {
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			// Some encoders leave the padding out.
			if b2, err2 := base64.RawStdEncoding.DecodeString(data); err2 == nil {
				return b2, nil
			}
			return nil, fmt.Errorf("the base64 data is not valid: %v", err)
		}
		return b, nil
	}
	s, err := url.PathUnescape(data)
	if err != nil {
		return nil, fmt.Errorf("the percent-encoded data is not valid: %v", err)
	}
	return []byte(s), nil
}

func cutSuffixFold(s, suffix string) (string, bool) {
	if len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix) {
		return s[:len(s)-len(suffix)], true
	}
	return s, false
}

// attach makes the prompt's files attachments of the session: a data:
// URL's bytes become a new artifact (through artifact.Service, as an upload
// does), an artifact URL names one the session has. It answers them in the
// parts' order, and the ids of the artifacts it made, for discard when the
// prompt is not accepted after all. Every reference is checked before any
// bytes are stored, and a failed store deletes what this request stored.
func (s *Server) attach(c echo.Context, files []chatFile) (attached []artifact.Artifact, made []string, err error) {
	if len(files) > maxAttachments {
		return nil, nil, fieldErr(files[maxAttachments].field, fmt.Sprintf("a prompt takes at most %d files", maxAttachments))
	}
	if err := s.ownSession(c); err != nil {
		return nil, nil, err
	}
	if s.isClosing() {
		return nil, nil, apiErr(http.StatusServiceUnavailable, codes.ShuttingDown, "the daemon is shutting down")
	}
	ctx := c.Request().Context()
	arts := s.rt.Artifacts()
	sessionID := c.Param("id")
	attached = make([]artifact.Artifact, len(files))
	seen := map[string]bool{}
	for i, f := range files {
		if f.artifact == "" {
			continue
		}
		if seen[f.artifact] {
			return nil, nil, fieldErr(f.field+".url", fmt.Sprintf("%s.url repeats the artifact %s", f.field, clipID(f.artifact)))
		}
		seen[f.artifact] = true
		a, err := arts.Get(ctx, sessionID, f.artifact)
		if errors.Is(err, artifact.ErrNotFound) {
			return nil, nil, fieldErr(f.field+".url", fmt.Sprintf("%s.url names %s, which is not an artifact of this session", f.field, clipID(f.artifact)))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("chat: look up attachment %s: %w", f.artifact, err)
		}
		attached[i] = a
	}
	for i, f := range files {
		if f.artifact != "" {
			continue
		}
		a, err := arts.Put(ctx, sessionID, bytes.NewReader(f.data), artifact.PutOptions{
			MediaType: f.mediaType, Name: f.filename, Size: int64(len(f.data)),
		})
		if err != nil {
			s.discard(c, made)
			return nil, nil, fileErr(f, err)
		}
		made = append(made, a.ID)
		attached[i] = a
	}
	return attached, made, nil
}

// fileErr says what was wrong with storing file f, naming its part.
func fileErr(f chatFile, err error) error {
	var fe *artifact.FieldError
	if errors.As(err, &fe) {
		field := f.field
		switch fe.Field {
		case "mediaType":
			field += ".mediaType"
		case "name":
			field += ".filename"
		}
		return apiErr(http.StatusBadRequest, codes.InvalidField, sentence(fmt.Errorf("%s: %s", field, fe.Message)), field)
	}
	if errors.Is(err, artifact.ErrNotFound) {
		return notFound() // the session went meanwhile
	}
	if ae := artifactErr(err); ae != nil {
		ae.Fields = []string{f.field}
		return ae
	}
	return fmt.Errorf("chat: store %s as an artifact: %w", f.field, err)
}

// discard deletes the artifacts a chat request stored for a prompt that
// did not go out, so a refused request leaves nothing behind. It runs past
// the request's end (the client may be gone); a failure is logged, and the
// session keeps an artifact nobody attached.
func (s *Server) discard(c echo.Context, ids []string) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 10*time.Second)
	defer cancel()
	for _, id := range ids {
		if _, err := s.rt.Artifacts().Delete(ctx, c.Param("id"), id); err != nil && !errors.Is(err, artifact.ErrNotFound) {
			s.log.WarnContext(ctx, "chat: delete an attachment of a refused prompt", "session", c.Param("id"), "artifact", id, "err", err)
		}
	}
}

// chat serves POST /api/sessions/{id}/chat: the last user message of the
// body becomes a prompt, and the answer streams the turn that answers it
// (it may wait in the inbox first). The stream subscribes before the prompt
// goes out, so it misses nothing of that turn. A client that goes away does
// not cancel the turn (POST …/abort does).
func (s *Server) chat(c echo.Context) error {
	var body chatBody
	if err := decodeBodyLoose(c, s.lim.PromptBodyBytes, &body); err != nil {
		return err
	}
	p, err := body.prompt(c.Param("id"))
	if err != nil {
		return err
	}
	msg := &pb.Prompt{Caller: s.caller(c), Message: p.text}
	var made []string
	if len(p.files) > 0 {
		attached, m, err := s.attach(c, p.files)
		if err != nil {
			return err
		}
		made = m
		for _, a := range attached {
			msg.Attachments = append(msg.Attachments, artifact.ToProto(a))
		}
	}
	msg.ClientTag = chatTag()
	st, err := s.subscribe(c, "chat", &pb.Subscribe{From: pb.SubscribeFrom_SUBSCRIBE_FROM_NOW},
		func(q *delivery.Queue) delivery.Sink { return &turnSink{q: q, tag: msg.ClientTag} })
	if err != nil {
		s.discard(c, made)
		return err
	}
	res, err := s.ask(c, msg)
	if err != nil {
		// Whether the session took the prompt is not known (a timeout):
		// its attachments stay.
		st.close()
		return err
	}
	r := res.(*pb.PromptResult)
	if r.GetError() != nil {
		st.close()
		s.discard(c, made)
		ae := fromPB(r.GetError())
		if ae.Code == codes.EmptyPrompt {
			ae.Fields = []string{"messages"}
		}
		return ae
	}
	comment := "accepted"
	if r.GetQueued() {
		comment = "queued"
	}
	s.serveChat(c, st, comment)
	return nil
}

// chatStream serves GET /api/sessions/{id}/chat/stream: the running turn
// from its start, then live, as POST …/chat streams it; 204 when no turn
// runs.
func (s *Server) chatStream(c echo.Context) error {
	st, err := s.subscribe(c, "chat", &pb.Subscribe{From: pb.SubscribeFrom_SUBSCRIBE_FROM_TURN_START},
		func(q *delivery.Queue) delivery.Sink { return &turnSink{q: q} })
	if err != nil {
		return err
	}
	if st == nil {
		return c.NoContent(http.StatusNoContent)
	}
	s.serveChat(c, st, "resumed")
	return nil
}

// serveChat answers with the UI message stream and writes the turn into it
// until its finish (or until the stream is cut), on the request's
// goroutine: a chat stream lives as long as its turn.
func (s *Server) serveChat(c echo.Context, st *stream, comment string) {
	defer st.close()
	c.Response().Header().Set(uiMessageStreamHeader, "v1")
	sse, err := delivery.StartSSE(c.Response(), comment)
	if err != nil {
		return
	}
	ctx, cancel := s.guard.Context(c.Request().Context(), guard.IdentityOf(c))
	defer cancel()
	st.run(ctx, s.chatWriter, chatTransport{sse})
}

// chatTag tags a chat request's prompt, so that its stream recognises the
// user message the session echoes and learns the prompt's id from it.
func chatTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "chat-" + hex.EncodeToString(b[:])
}
