package turn

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/codes"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// ReplyPrefix begins the id of every command the machine sends that expects
// an answer: the session routes the agent's answers whose id has it to
// Machine.Reply.
const ReplyPrefix = "turn."

// Codes of the refusals the machine answers (the session's request codes).
const (
	CodeEmptyPrompt   = codes.EmptyPrompt
	CodeImagesRefused = codes.ImagesNotSupported
	CodeInboxFull     = codes.InboxFull
	CodeUnknownUI     = codes.UnknownUIRequest
	CodeTooLarge      = codes.TooLarge
)

// Codes of TurnError: what failed.
const (
	CodeAgentExited = codes.AgentExited
	CodeNotAnswered = codes.NotAnswered
	CodeAgentError  = codes.AgentError
)

// Defaults of the inbox's bounds.
const (
	DefaultInboxMax    = 100      // prompts (Config.InboxMax)
	DefaultPromptBytes = 16 << 20 // one prompt (Config.PromptBytes)
	DefaultInboxBytes  = 32 << 20 // every prompt waiting (Config.InboxBytes)
)

// Out is what the machine tells the session. Its methods are called
// synchronously, in the order things happen, from within the machine's
// methods; none may call back into the machine except for its read-only
// methods (Busy, Queued, LastID).
type Out interface {
	// Emit appends an event to the session's frame log. A non-empty sticky
	// key makes it that key's current event.
	Emit(ev *pb.Event, sticky string)
	// Unstick drops a sticky key's event (a dialog was resolved).
	Unstick(key string)
	// Send writes a command to the agent; the session drops it when no
	// agent runs. When cmd.ReplyID is set its answer (or the news that the
	// agent exited before answering) must come back to Reply.
	Send(cmd Command)
	// Transcript appends entries to the session's transcript.
	Transcript(entries []store.Entry)
	// Record appends a prompt's user entry to the transcript before the
	// prompt is accepted: the session answers the prompt, and tells the
	// machine (Recorded or Unrecorded), once the entry is durable or its
	// write failed, in the order of the records.
	Record(promptID uint64, entry store.Entry)
	// Status says that Busy or Queued changed: the session emits its status.
	Status()
	// Title says that the agent named the session.
	Title(title string)
	// AbortGrace asks for AbortGraceExpired(turnID) after the abort grace.
	AbortGrace(turnID uint64)
	// Model passes the model the agent described in a get_state answer:
	// for a plain pi agent it tells whether prompts may carry images (an
	// agent that announced surfaced/1 said so itself; the session ignores
	// it then).
	Model(m *proc.Model)
}

// Command is one record for the agent.
type Command struct {
	// Line is the JSON record, without its newline.
	Line []byte
	// ReplyID is the command's id when its answer must come back to Reply
	// (it begins with ReplyPrefix); empty when no answer is awaited.
	ReplyID string
	// Attachments are, on a prompt command, the artifacts the turn's
	// prompts attached, in order (records, never bytes). Line does not
	// carry them: the session delivers them as its agent takes them.
	Attachments []*pb.Artifact
	// Trace is the W3C traceparent the command is sent in ("" untraced):
	// a prompt's is its first prompt's, so that the agent's turn joins the
	// trace of the request that asked for it.
	Trace string
}

// Config is what a Machine is made with.
type Config struct {
	// Out receives everything the machine says; required.
	Out Out
	// LastID is the highest turn or prompt id the session may have handed
	// out before (0 for a new session): both sequences continue above it.
	LastID uint64
	// Reserve, when set, is called before the machine hands out an id above
	// the highest one reserved so far (initially LastID): need is that id.
	// It returns the new highest reserved id, at least need; the session
	// persists it before any frame carrying such an id leaves. Nil: ids are
	// handed out without a bound.
	Reserve func(need uint64) (reserved uint64)
	// InboxMax bounds the prompts waiting in the inbox (0: DefaultInboxMax).
	InboxMax int
	// PromptBytes bounds one prompt: its text and its images' data (0:
	// DefaultPromptBytes). It also bounds the prompts joined into one
	// turn's prompt command: the next turn takes what is left.
	PromptBytes int
	// InboxBytes bounds the prompts waiting, in bytes as PromptBytes
	// counts them (0: DefaultInboxBytes).
	InboxBytes int
	// Images reports whether prompts may carry images now. Nil: never.
	Images func() bool
	// Now stamps transcript entries and times turns. Nil: entries carry a
	// zero time, which the store reads as the time it appends them.
	Now func() time.Time
	// Logger receives the machine's log lines. Nil: discarded.
	Logger *slog.Logger
}

// Prompt is a prompt a client sends.
type Prompt struct {
	Text   string
	Images []*pb.Image
	// Attachments are artifacts of the session the prompt attaches (the
	// sender checked them); the transcript and the user message carry
	// their ids.
	Attachments []*pb.Artifact
	// Via is who sent it: browser, acp, agent.
	Via string
	// Tag is the client's own tag, echoed in the user message.
	Tag string
	// Trace is the traceparent of the request that sent it ("" untraced).
	Trace string
}

// Accepted is a prompt the machine took.
type Accepted struct {
	// ID is the prompt's id, unique for the life of the session.
	ID uint64
	// Queued: it waits for the running turn (or for the agent).
	Queued bool
}

// queued is a prompt in the inbox: waiting for its record, then for its
// turn.
type queued struct {
	id          uint64
	text        string
	images      []*pb.Image
	attachments []*pb.Artifact
	via         string
	tag         string
	trace       string
	// recorded: its user entry is durable, and it is accepted.
	recorded bool
	// turn is the turn id its record names: handed out with the prompt when
	// it was to start a turn at once; 0 when it was to wait.
	turn uint64
	// failWhy, when set, fails it as soon as it is recorded: the inbox was
	// failed (FailInbox) while its record was in flight.
	failWhy string
	size    int // promptSize
}

// promptSize is what a prompt weighs against PromptBytes and InboxBytes:
// its text and its images, as they go to the agent.
func promptSize(text string, images []*pb.Image) int {
	n := len(text)
	for _, im := range images {
		n += len(im.GetData()) + len(im.GetMimeType())
	}
	return n
}

// inboxSize is what the inbox holds, in bytes as promptSize counts them
// (the inbox holds at most InboxMax prompts).
func (m *Machine) inboxSize() int {
	n := 0
	for _, q := range m.inbox {
		n += q.size
	}
	return n
}

// Machine is a session's turns, inbox and agent dialogs. The zero value is
// not usable; use New.
type Machine struct {
	out      Out
	log      *slog.Logger
	now      func() time.Time
	images   func() bool
	reserve  func(uint64) uint64
	inboxMax int
	// promptBytes and inboxBytes bound a prompt and the inbox.
	promptBytes, inboxBytes int

	// Ids: the last turn and prompt ids handed out, the highest reserved.
	turnID, promptID, reserved uint64
	// reqN numbers the commands sent to the agent.
	reqN uint64

	ready   bool // the agent takes prompts
	inbox   []queued
	cur     *turn // the turn in progress, nil when idle
	dialogs []*dialog

	// upd is the event of the message_update being read, reused line after
	// line.
	upd assistantEvent
}

// New returns a machine with an idle session whose agent is not ready yet.
func New(cfg Config) *Machine {
	if cfg.Out == nil {
		panic("turn: Config.Out is nil")
	}
	m := &Machine{
		out:      cfg.Out,
		log:      cfg.Logger,
		now:      cfg.Now,
		images:   cfg.Images,
		reserve:  cfg.Reserve,
		inboxMax: cfg.InboxMax,
		turnID:   cfg.LastID,
		promptID: cfg.LastID,
		reserved: cfg.LastID,
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.inboxMax <= 0 {
		m.inboxMax = DefaultInboxMax
	}
	m.promptBytes = cfg.PromptBytes
	if m.promptBytes <= 0 {
		m.promptBytes = DefaultPromptBytes
	}
	m.inboxBytes = cfg.InboxBytes
	if m.inboxBytes <= 0 {
		m.inboxBytes = DefaultInboxBytes
	}
	return m
}

// Busy reports whether a turn runs.
func (m *Machine) Busy() bool { return m.cur != nil }

// Queued is the number of accepted prompts waiting in the inbox (those
// whose record is in flight are not accepted yet).
func (m *Machine) Queued() int {
	n := 0
	for _, q := range m.inbox {
		if q.recorded {
			n++
		}
	}
	return n
}

// LastID is the highest turn or prompt id handed out (Config.LastID when
// none was).
func (m *Machine) LastID() uint64 { return max(m.turnID, m.promptID) }

// next hands out the next id of a sequence (turns or prompts).
func (m *Machine) next(seq *uint64) uint64 {
	id := *seq + 1
	if m.reserve != nil && id > m.reserved {
		r := m.reserve(id)
		if r < id {
			panic(fmt.Sprintf("turn: Reserve(%d) reserved only up to %d", id, r))
		}
		m.reserved = r
	}
	*seq = id
	return id
}

// reqID is a fresh id for a command to the agent.
func (m *Machine) reqID(purpose string) string {
	m.reqN++
	return ReplyPrefix + purpose + "." + strconv.FormatUint(m.reqN, 10)
}

// send writes a command; with reply, its answer comes back to Reply.
func (m *Machine) send(v any, replyID string) {
	line, err := proc.Marshal(v)
	if err != nil { // the commands are plain structs: cannot happen
		m.log.Error("agent command not marshalable", "err", err)
		return
	}
	m.out.Send(Command{Line: line, ReplyID: replyID})
}

// stamp is the time a transcript entry carries.
func (m *Machine) stamp() time.Time {
	if m.now == nil {
		return time.Time{}
	}
	return m.now()
}

func (m *Machine) chat(chunk pb.ChatChunk) { m.out.Emit(pb.ChatOf(chunk), "") }

func turnStart(id uint64, promptIDs []uint64) *pb.ChatEvent_TurnStart {
	return &pb.ChatEvent_TurnStart{TurnStart: &pb.TurnStart{TurnId: id, PromptIds: promptIDs, MessageId: pb.TurnMessageID(id)}}
}

// Prompt takes a prompt: it hands out the prompt's id and asks the session
// to record its user entry (Out.Record), and nothing else happens until the
// record is durable: Recorded accepts the prompt (its user message; a turn
// starts at once when the agent is ready and idle, else it waits in the
// inbox), Unrecorded drops it as if it never came. A refused prompt (no
// text and no images, over PromptBytes, images the agent does not take, a
// full inbox in prompts or bytes) changes nothing.
func (m *Machine) Prompt(p Prompt) (id uint64, refused *pb.Error) {
	size := promptSize(p.Text, p.Images)
	switch {
	case strings.TrimSpace(p.Text) == "" && len(p.Images) == 0 && len(p.Attachments) == 0:
		return 0, pb.Err(CodeEmptyPrompt, "the prompt has no text")
	case size > m.promptBytes:
		return 0, pb.Err(CodeTooLarge, fmt.Sprintf("the prompt is %d bytes, over the %d-byte limit (limits.prompt_bytes)", size, m.promptBytes))
	case len(p.Images) > 0 && (m.images == nil || !m.images()):
		return 0, pb.Err(CodeImagesRefused, "this agent does not accept images")
	case len(m.inbox) >= m.inboxMax:
		return 0, pb.Err(CodeInboxFull, fmt.Sprintf("%d prompts are already waiting", len(m.inbox)))
	}
	if held := m.inboxSize(); len(m.inbox) > 0 && held+size > m.inboxBytes {
		return 0, pb.Err(CodeInboxFull, fmt.Sprintf("%d bytes of prompts are already waiting; this one (%d bytes) would pass the %d-byte limit (limits.inbox_bytes)",
			held, size, m.inboxBytes))
	}
	q := queued{id: m.next(&m.promptID), text: p.Text, images: p.Images, attachments: p.Attachments, via: p.Via, tag: p.Tag, trace: p.Trace, size: size}
	if m.cur == nil && m.ready && len(m.inbox) == 0 {
		// It will start a turn as soon as it is recorded: its record names
		// that turn, and the turn does not write it again.
		q.turn = m.next(&m.turnID)
	}
	m.inbox = append(m.inbox, q)
	m.out.Record(q.id, store.Entry{Role: "user", Text: q.text, Via: q.via, TurnID: q.turn, PromptID: q.id, At: m.stamp(),
		AttachmentIDs: attachmentIDs(q.attachments)})
	return q.id, nil
}

// Recorded says the record of prompt id is durable: the prompt is
// accepted, and Accepted says how. False for a prompt that is not waiting
// for its record.
func (m *Machine) Recorded(id uint64) (Accepted, bool) {
	i := m.indexOf(id)
	if i < 0 || m.inbox[i].recorded {
		return Accepted{}, false
	}
	q := &m.inbox[i]
	q.recorded = true
	waits := m.cur != nil || !m.ready || i > 0 || q.failWhy != ""
	m.chat(&pb.ChatEvent_UserMessage{UserMessage: &pb.UserMessage{
		PromptId: q.id, Text: q.text, Via: q.via, Tag: q.tag, Queued: waits, Images: uint32(len(q.images)),
		AttachmentIds: attachmentIDs(q.attachments)}})
	if q.failWhy != "" {
		failed := *q
		m.inbox = append(m.inbox[:i], m.inbox[i+1:]...)
		m.failPrompts([]queued{failed}, failed.failWhy)
		return Accepted{ID: id, Queued: true}, true
	}
	if waits {
		m.out.Status() // the queued count changed
	}
	m.maybeStart()
	return Accepted{ID: id, Queued: waits}, true
}

// Unrecorded says the record of prompt id failed: the prompt is dropped,
// as if it never came (nothing of it was shown).
func (m *Machine) Unrecorded(id uint64) {
	if i := m.indexOf(id); i >= 0 && !m.inbox[i].recorded {
		m.inbox = append(m.inbox[:i], m.inbox[i+1:]...)
	}
}

func (m *Machine) indexOf(id uint64) int {
	for i, q := range m.inbox {
		if q.id == id {
			return i
		}
	}
	return -1
}

// AgentReady says the agent takes prompts: a turn starts for the prompts
// waiting.
func (m *Machine) AgentReady() {
	m.ready = true
	m.maybeStart()
}

// AgentStopped says the session is stopping the agent on purpose: no prompt
// goes out until AgentReady. The running turn and the inbox are left to
// Close or FailInbox.
func (m *Machine) AgentStopped() { m.ready = false }

// AgentGone says the agent exited. Its dialogs are withdrawn. Unless it was
// stopped on purpose (the session then closed its turn already, with
// Close), a running turn ends with an error that says how the agent stopped
// (how: "exit code 1", "signal killed", ...). Queued prompts stay for the
// next agent; FailInbox answers them when none will come.
func (m *Machine) AgentGone(how string, onPurpose bool) {
	m.ready = false
	m.cancelDialogs(0)
	if onPurpose || m.cur == nil {
		return
	}
	if m.cur.aborted {
		// The user asked the turn to stop, and it stopped.
		m.endTurn("cancelled", "")
		return
	}
	m.chat(&pb.ChatEvent_TurnError{TurnError: &pb.TurnError{ErrorText: "The agent stopped during the turn (" + how + ").", Code: CodeAgentExited}})
	m.endTurn("error", "")
}

// Close answers what the agent, stopped on purpose (the session ends or
// sleeps), will not: a running turn ends as cancelled (what it said so far
// is kept in the transcript) and the queued prompts are answered as not
// answered because of why ("the session ended"). No turn starts until
// AgentReady.
func (m *Machine) Close(why string) {
	m.ready = false
	if m.cur != nil {
		m.cur.aborted = true
		m.endTurn("cancelled", "")
	}
	m.FailInbox(why)
}

// FailInbox answers every queued prompt with one turn that says it was not
// answered (nothing can run them: the agent did not start, or will not be
// restarted). A prompt whose record is in flight is failed the same way
// once it is recorded.
func (m *Machine) FailInbox(why string) {
	var batch []queued
	kept := m.inbox[:0]
	for _, q := range m.inbox {
		if q.recorded {
			batch = append(batch, q)
			continue
		}
		q.failWhy = why
		kept = append(kept, q)
	}
	clear(m.inbox[len(kept):])
	m.inbox = kept
	m.failPrompts(batch, why)
}

// failPrompts answers accepted prompts with one turn that says they were
// not answered.
func (m *Machine) failPrompts(batch []queued, why string) {
	if len(batch) == 0 {
		return
	}
	id := m.next(&m.turnID)
	ids := make([]uint64, 0, len(batch))
	for _, q := range batch {
		ids = append(ids, q.id)
	}
	m.chat(turnStart(id, ids))
	m.chat(&pb.ChatEvent_TurnError{TurnError: &pb.TurnError{ErrorText: "The message was not answered: " + why + ".", Code: CodeNotAnswered}})
	m.chat(&pb.ChatEvent_TurnFinish{TurnFinish: &pb.TurnFinish{TurnId: id, PromptIds: ids, StopReason: "cancelled"}})
	m.out.Status()
}

// Abort cancels the running turn: its dialogs are withdrawn, the agent is
// told, and the session is asked to arm the abort grace. wasBusy reports
// whether a turn was running. The turn answers cancelled however the agent
// ends it (unless it fails).
func (m *Machine) Abort() (wasBusy bool) {
	t := m.cur
	if t == nil {
		return false
	}
	if !t.aborted {
		t.aborted = true
		m.cancelDialogs(t.id)
		m.send(proc.SimpleCommand{ID: m.reqID("abort"), Type: proc.CmdAbort}, "")
		m.out.AbortGrace(t.id)
	}
	return true
}

// AbortGraceExpired ends a cancelled turn the agent did not end.
func (m *Machine) AbortGraceExpired(turnID uint64) {
	if t := m.cur; t != nil && t.id == turnID && t.aborted {
		m.log.Warn("agent did not end the cancelled turn; ending it", "turn", turnID)
		m.endTurn("cancelled", "")
	}
}

// maybeStart starts a turn for the accepted prompts queued when the agent
// can take it, as many as fit in PromptBytes (those whose record is in
// flight come after them, and wait).
func (m *Machine) maybeStart() {
	if m.cur != nil || !m.ready {
		return
	}
	// The recorded prompts at the head of the inbox, as long as together
	// they stay within PromptBytes (the first one always goes); the rest
	// wait for the next turn.
	n, size := 0, 0
	for n < len(m.inbox) && m.inbox[n].recorded && (n == 0 || size+m.inbox[n].size <= m.promptBytes) {
		size += m.inbox[n].size
		n++
	}
	if n == 0 {
		return
	}
	batch := append([]queued(nil), m.inbox[:n]...)
	rest := copy(m.inbox, m.inbox[n:])
	clear(m.inbox[rest:])
	m.inbox = m.inbox[:rest]
	var t *turn
	if len(batch) == 1 && batch[0].turn != 0 && batch[0].turn == m.turnID {
		// The turn its record names, handed out with it: nothing else
		// started since.
		t = m.turnWithID(batch[0].turn)
	} else {
		t = m.newTurn()
	}
	texts := make([]string, 0, len(batch))
	var images []proc.ImageContent
	var attachments []*pb.Artifact
	var entries []store.Entry
	var trace string
	at := m.stamp()
	for _, q := range batch {
		t.promptIDs = append(t.promptIDs, q.id)
		if trace == "" {
			trace = q.trace
		}
		texts = append(texts, q.text)
		for _, im := range q.images {
			images = append(images, proc.ImageContent{Type: "image", Data: im.GetData(), MimeType: im.GetMimeType()})
		}
		attachments = append(attachments, q.attachments...)
		if q.turn != t.id {
			// Recorded while it waited: the transcript says which turn
			// answered it (readers keep a prompt's last entry).
			entries = append(entries, store.Entry{Role: "user", Text: q.text, Via: q.via, TurnID: t.id, PromptID: q.id, At: at,
				AttachmentIDs: attachmentIDs(q.attachments)})
		}
	}
	m.cur = t
	if len(entries) > 0 {
		m.out.Transcript(entries)
	}
	t.promptReq = m.reqID("prompt")
	m.out.Status()
	m.chat(turnStart(t.id, t.promptIDs))
	line, err := proc.Marshal(proc.PromptCommand{ID: t.promptReq, Type: proc.CmdPrompt, Message: strings.Join(texts, "\n\n"), Images: images})
	if err != nil { // a plain struct: cannot happen
		m.log.Error("agent command not marshalable", "err", err)
		return
	}
	m.out.Send(Command{Line: line, ReplyID: t.promptReq, Attachments: attachments, Trace: trace})
	m.log.Info("turn started", "turn", t.id, "prompts", len(batch), "attachments", len(attachments))
}

// attachmentIDs are the ids of attachments; nil when there are none.
func attachmentIDs(attachments []*pb.Artifact) []string {
	if len(attachments) == 0 {
		return nil
	}
	ids := make([]string, len(attachments))
	for i, a := range attachments {
		ids[i] = a.GetId()
	}
	return ids
}

// startAgentTurn opens a turn for a run the agent started on its own (an
// extension's message, a retry or compaction after the turn had ended):
// clients see it like any turn, and queued prompts wait for it, since the
// agent would refuse a prompt while it runs.
func (m *Machine) startAgentTurn() *turn {
	t := m.newTurn()
	m.cur = t
	m.out.Status()
	m.chat(turnStart(t.id, nil))
	m.log.Info("turn started by the agent", "turn", t.id)
	return t
}

// endTurn closes the turn: busy goes false before finish, so a client that
// stops reading at finish has already seen the session idle. Then the next
// turn starts for what was queued meanwhile.
func (m *Machine) endTurn(stopReason, errorText string) {
	t := m.cur
	if t == nil {
		return
	}
	if t.aborted && stopReason != "error" {
		// Whatever the agent made of it, a turn the user cancelled answers
		// cancelled (ACP requires it of session/cancel).
		stopReason, errorText = "cancelled", ""
	}
	m.closeParts()
	m.recordAssistant()
	m.cur = nil
	m.cancelDialogs(t.id)
	m.out.Status()
	switch stopReason {
	case "cancelled":
		m.chat(&pb.ChatEvent_TurnAbort{TurnAbort: &pb.TurnAbort{}})
	case "error":
		if errorText != "" {
			m.chat(&pb.ChatEvent_TurnError{TurnError: &pb.TurnError{ErrorText: errorText, Code: CodeAgentError}})
		}
	}
	m.chat(&pb.ChatEvent_TurnFinish{TurnFinish: &pb.TurnFinish{TurnId: t.id, PromptIds: t.promptIDs, StopReason: stopReason}})
	if m.now != nil {
		m.log.Info("turn ended", "turn", t.id, "stop", stopReason, "took", m.now().Sub(t.started).Round(time.Millisecond))
	} else {
		m.log.Info("turn ended", "turn", t.id, "stop", stopReason)
	}
	m.maybeStart()
}
