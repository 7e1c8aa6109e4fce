package session

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/surfaced/surfaced/actors/session/internal/turn"
	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/plainjson"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// maxPromptImage bounds the bytes of one image attachment handed to a plain
// pi agent (they cross the pipe in base64, and models take no larger ones).
const maxPromptImage = 20 << 20

// held is a command waiting behind a prompt whose images are being read.
type held struct {
	incarnation uint32
	cmd         turn.Command
}

// sendPrompt delivers a prompt with attachments as the agent takes them: a
// surfaced/1 agent gets their ids on the prompt line (it reads the bytes
// with artifact_get); a plain pi agent gets its image attachments as pi's
// own images, in base64, the only way pi takes them, read off the actor
// while the commands after the prompt wait their turn.
func (s *sessionActor) sendPrompt(c turn.Command) {
	var p proc.PromptCommand
	if err := json.Unmarshal(c.Line, &p); err != nil {
		s.log.Error("prompt line not readable", "err", err)
		s.sendCommand(c)
		return
	}
	if s.agent.announced {
		for _, a := range c.Attachments {
			p.Attachments = append(p.Attachments, proc.PromptAttachment{ID: a.GetId(), MediaType: a.GetMediaType(), Name: a.GetName()})
		}
		c.Line = mustMarshal(p)
		c.Attachments = nil
		s.sendCommand(c)
		return
	}
	var images []*pb.Artifact
	// The images join the prompt's line: together they stay within what
	// one prompt command may carry (limits.prompt_bytes).
	budget := int64(s.lim.PromptBytes - len(c.Line))
	for _, a := range c.Attachments {
		encoded := (a.GetSize() + 2) / 3 * 4
		switch {
		case !piImage(a.GetMediaType()):
			s.diagnostic(codes.AttachmentNotDelivered, fmt.Sprintf("%s (%s) was not given to the agent: a pi agent takes images (PNG, JPEG, GIF, WebP) only", a.GetId(), a.GetMediaType()))
		case !s.status.images:
			s.diagnostic(codes.AttachmentNotDelivered, fmt.Sprintf("%s was not given to the agent: its model takes no images", a.GetId()))
		case a.GetSize() > maxPromptImage:
			s.diagnostic(codes.AttachmentNotDelivered, fmt.Sprintf("%s was not given to the agent: %d bytes, over the %d a prompt's image may have", a.GetId(), a.GetSize(), maxPromptImage))
		case encoded > budget:
			s.diagnostic(codes.AttachmentNotDelivered, fmt.Sprintf("%s was not given to the agent: with it the prompt would pass the %d bytes one prompt may have", a.GetId(), s.lim.PromptBytes))
		case s.deps.Artifacts == nil:
		default:
			budget -= encoded
			images = append(images, a)
		}
	}
	c.Attachments = nil
	if len(images) == 0 {
		s.sendCommand(c)
		return
	}
	s.loading++
	svc, self, root, inc, log := s.deps.Artifacts, s.self, s.root, s.agent.incarnation, s.log
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, a := range images {
			data, err := readBase64(ctx, svc, a.GetId())
			if err != nil {
				log.Warn("an image attachment could not be read; the prompt goes without it", "artifact", a.GetId(), "err", err)
				continue
			}
			p.Images = append(p.Images, proc.ImageContent{Type: "image", Data: data, MimeType: baseType(a.GetMediaType())})
		}
		c.Line = mustMarshal(p)
		root.Send(self, &imagesRead{incarnation: inc, cmd: c})
	}()
}

// imagesRead sends the prompt whose images were read, then the commands that
// waited behind it (those of the incarnation it was for; a prompt for an
// agent that has gone since is dropped, as the agent would have dropped it).
func (s *sessionActor) imagesRead(m *imagesRead) {
	s.loading--
	if m.incarnation == s.agent.incarnation {
		s.sendCommand(m.cmd)
	}
	for len(s.outbox) > 0 && s.loading == 0 {
		h := s.outbox[0]
		s.outbox = s.outbox[1:]
		if h.incarnation != s.agent.incarnation {
			continue
		}
		if len(h.cmd.Attachments) > 0 {
			s.sendPrompt(h.cmd)
		} else {
			s.sendCommand(h.cmd)
		}
	}
	if len(s.outbox) == 0 {
		s.outbox = nil
	}
}

// readBase64 reads an artifact's bytes as base64.
func readBase64(ctx context.Context, svc *artifact.Service, id string) (string, error) {
	_, r, err := svc.Open(ctx, id)
	if err != nil {
		return "", err
	}
	defer r.Close()
	var b strings.Builder
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	n, err := io.Copy(enc, io.LimitReader(r, maxPromptImage+1))
	if err != nil {
		return "", err
	}
	if n > maxPromptImage {
		return "", fmt.Errorf("over %d bytes", maxPromptImage)
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	return b.String(), nil
}

// piImage reports whether pi takes images of this media type.
func piImage(mt string) bool {
	switch baseType(mt) {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

func baseType(mt string) string {
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

func mustMarshal(v any) []byte {
	b, err := plainjson.Marshal(v)
	if err != nil { // plain structs: cannot happen
		panic(err)
	}
	return b
}
