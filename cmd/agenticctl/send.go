package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// statusEvery is how often the status line on a terminal is redrawn.
const statusEvery = 500 * time.Millisecond

func cmdSend(c *cli, args []string) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	approveAll := fs.Bool("approve-all", false, "allow every permission request of this turn")
	denyAll := fs.Bool("deny-all", false, "reject every permission request of this turn")
	queue := fs.Bool("queue", false, "while a turn runs, wait in the session's queue and run after it (the default)")
	steer := fs.Bool("steer", false, "while a turn runs, deliver the message into it, where the agent takes steering (else it is queued)")
	interrupt := fs.Bool("interrupt", false, "cancel the running turn, then send")
	var attached attachments
	fs.Func("file", "attach a file of the session's workspace (repeatable)", attached.add(fileAttachment))
	fs.Func("image", "attach an image file of the session's workspace (repeatable)", attached.add(imageAttachment))
	pos, err := c.parse(fs, args, "SESSION", "MESSAGE", "...")
	if err != nil {
		return err
	}
	if *approveAll && *denyAll {
		return usagef("--approve-all and --deny-all exclude each other")
	}
	mode := pb.DeliveryMode_DELIVERY_MODE_UNSPECIFIED
	modes := 0
	for _, m := range []struct {
		set  bool
		mode pb.DeliveryMode
	}{{*queue, pb.DeliveryMode_DELIVERY_MODE_QUEUE}, {*steer, pb.DeliveryMode_DELIVERY_MODE_STEER}, {*interrupt, pb.DeliveryMode_DELIVERY_MODE_INTERRUPT}} {
		if m.set {
			mode = m.mode
			modes++
		}
	}
	if modes > 1 {
		return usagef("--queue, --steer and --interrupt exclude each other")
	}
	sessionID, text := pos[0], strings.Join(pos[1:], " ")
	if text == "-" {
		in, err := io.ReadAll(c.stdin)
		if err != nil {
			return fmt.Errorf("read the message from stdin: %w", err)
		}
		text = string(in)
	}
	content := &pb.MessageContent{Parts: append([]*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: text}}}, attached...)}

	snap, messageID, err := c.sendMessage(sessionID, content, mode)
	if err != nil {
		return err
	}
	t := &turn{c: c, sessionID: sessionID, messageID: messageID, approve: *approveAll, deny: *denyAll,
		stdoutTTY: isTerminal(c.stdout), lastOutput: time.Now(), waiting: map[string]bool{}, answered: map[string]bool{}}
	l := &loop{event: t.event, interrupt: t.interrupt, onTick: t.tick, onInput: t.input}
	if isTerminal(c.stderr) {
		t.ticker = time.NewTicker(statusEvery)
		l.tick = t.ticker.C
		if f, ok := c.stdin.(*os.File); ok && isTerminal(f) && !t.approve && !t.deny {
			t.tty, t.lines = f, make(chan terminalLine)
			l.input = t.lines
		}
	}
	defer t.finish()
	// The session's snapshot point, taken before sending, is where the subscription
	// starts: the server replays from there, so no event of the reply is missed however
	// fast the agent answers (or however late the stream is registered).
	req := &pb.SubscribeRequest{SessionIds: []string{sessionID}, Start: &pb.SubscribeRequest_AfterSequence{AfterSequence: snap.GetLastSequence()}}
	if err := c.follow(context.Background(), req, l); err != nil {
		return err
	}
	return t.result
}

// attachments are the parts --file and --image add after the message's text, in the
// order they were given.
type attachments []*pb.ContentPart

// add returns a flag function that appends the part made of the flag's path.
func (a *attachments) add(part func(path string) *pb.ContentPart) func(string) error {
	return func(path string) error {
		// agenticd resolves nothing against this shell's directory: send it absolute.
		abs, err := filepath.Abs(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		*a = append(*a, part(abs))
		return nil
	}
}

func fileAttachment(path string) *pb.ContentPart {
	return &pb.ContentPart{Part: &pb.ContentPart_File{File: &pb.FileContent{Path: path, MimeType: mime.TypeByExtension(filepath.Ext(path))}}}
}

func imageAttachment(path string) *pb.ContentPart {
	return &pb.ContentPart{Part: &pb.ContentPart_Image{Image: &pb.ImageContent{
		Source: &pb.ImageContent_FilePath{FilePath: path}, MimeType: mime.TypeByExtension(filepath.Ext(path))}}}
}

// sendMessage sends content and returns the session's snapshot taken before it and the id
// of the reply. A stored session that is not open (not loaded since agenticd started,
// closed, or stopped with its agent) is reopened first, and the snapshot is then the
// reopened one. The reply's id is chosen here, so that every event of the turn can be
// told apart from the first one on. A message steered into a running turn follows that
// turn; a queued one waits for its own. What the server did is said on stderr when it is
// not a plain start.
func (c *cli) sendMessage(sessionID string, content *pb.MessageContent, mode pb.DeliveryMode) (*pb.SessionInfo, string, error) {
	ctx, cancel := c.call()
	got, err := c.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: sessionID})
	cancel()
	if err != nil {
		return nil, "", err
	}
	snap := got.GetSession()
	if snap.GetStatus() == pb.SessionStatus_SESSION_STATUS_CLOSED {
		if snap, err = c.reopen(snap); err != nil {
			return nil, "", err
		}
	}
	messageID := "ctl-" + uuid.NewString()
	// Each attempt is a request of its own (a retry of the same request_id would get the
	// first attempt's error back), under the same message id: a failed attempt took none.
	var resp *pb.SendMessageResponse
	send := func() error {
		ctx, cancel := c.call()
		defer cancel()
		var err error
		resp, err = c.client.SendMessage(ctx, &pb.SendMessageRequest{SessionId: sessionID, Content: content,
			RequestId: uuid.NewString(), MessageId: messageID, Delivery: mode})
		return err
	}
	err = send()
	// The session's replica or its database away for now: the same message again, until
	// it is taken (a message id already in use then means an earlier attempt took it).
	for pause := unavailableFirst; status.Code(err) == codes.Unavailable && pause <= unavailableLast*8; pause *= 2 {
		fmt.Fprintf(c.stderr, "agenticctl: %s; trying again in %s\n", status.Convert(err).Message(), min(pause, unavailableLast))
		time.Sleep(min(pause, unavailableLast))
		if err = send(); status.Code(err) == codes.AlreadyExists {
			err = nil
		}
	}
	// A session in error may still take messages (a provider failed once) or may not (its
	// agent stopped): only the server can tell.
	if status.Code(err) == codes.FailedPrecondition && snap.GetStatus() == pb.SessionStatus_SESSION_STATUS_ERROR {
		if snap, err = c.reopen(snap); err != nil {
			return nil, "", err
		}
		err = send()
	}
	if err != nil {
		return snap, messageID, err
	}
	switch resp.GetOutcome() {
	case pb.DeliveryOutcome_DELIVERY_OUTCOME_QUEUED:
		fmt.Fprintf(c.stderr, "agenticctl: queued as %s; it runs when the turns before it have ended%s\n", resp.GetMessageId(), because(resp.GetOutcomeReason()))
	case pb.DeliveryOutcome_DELIVERY_OUTCOME_STEERED:
		fmt.Fprintf(c.stderr, "agenticctl: delivered into the running turn %s\n", resp.GetMessageId())
	}
	return snap, resp.GetMessageId(), nil
}

// because is a reason as a clause, empty for none.
func because(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// reopen loads a session that is not open and says so on stderr.
func (c *cli) reopen(s *pb.SessionInfo) (*pb.SessionInfo, error) {
	id := s.GetSessionId()
	was := "was not loaded"
	if s.GetStatus() == pb.SessionStatus_SESSION_STATUS_ERROR {
		was = "had stopped (" + s.GetStatusReason() + ")"
	}
	loaded, err := c.load(id, 0)
	if err != nil {
		return nil, fmt.Errorf("session %s %s, and reopening it failed: %w (run `agenticctl load %s` to try again)", id, was, err, id)
	}
	fmt.Fprintf(c.stderr, "agenticctl: session %s %s; reopened it (%s)\n", id, was, storedMessages(loaded.GetMessageCount()))
	return loaded, nil
}

// load reopens a stored session and returns its snapshot after the reopening, taken
// with GetSession: not every agent's LoadSession answer counts the stored messages.
func (c *cli) load(sessionID string, maxHistory int) (*pb.SessionInfo, error) {
	ctx, cancel := c.call()
	defer cancel()
	resp, err := c.client.LoadSession(ctx, &pb.LoadSessionRequest{SessionId: sessionID, MaxHistory: int32(maxHistory)})
	if err != nil {
		return nil, err
	}
	got, err := c.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: sessionID})
	if err != nil {
		return resp.GetSession(), nil
	}
	return got.GetSession(), nil
}

func storedMessages(n int64) string {
	if n == 1 {
		return "1 stored message"
	}
	return fmt.Sprintf("%d stored messages", n)
}

// turn prints one turn of a session: the reply's text on stdout as it streams, tool calls,
// permission requests and errors on stderr. When stderr is a terminal it also keeps a
// status line there while the turn waits, and when stdin is one too it asks about
// permission requests inline.
type turn struct {
	c             *cli
	sessionID     string
	messageID     string
	approve, deny bool
	cancelled     bool
	result        error

	stdoutTTY  bool
	midLine    bool // the reply's last text on stdout did not end its line
	lastOutput time.Time
	ticker     *time.Ticker // nil: stderr is not a terminal
	status     string       // the status line on the screen ("": none)

	// waiting holds the requests this turn pointed to `agenticctl approve` for.
	waiting map[string]bool

	tty    *os.File // nil: permission requests are not asked inline
	lines  chan terminalLine
	reader *lineReader
	asking []*pb.PermissionRequest // asked on the terminal, oldest first
	listed string                  // the request whose options are on the screen
	asked  bool                    // the question line is on the screen, the cursor after it
	// answered holds the requests answered here, whose confirmation is already shown.
	answered map[string]bool
}

func (t *turn) ours(messageID string) bool { return messageID == "" || messageID == t.messageID }

// clear makes room for output on the terminal: it erases the status line and ends the
// question line.
func (t *turn) clear() {
	if t.status != "" {
		fmt.Fprint(t.c.stderr, "\r\x1b[K")
		t.status = ""
	}
	if t.asked {
		fmt.Fprintln(t.c.stderr)
		t.asked = false
	}
	t.lastOutput = time.Now()
}

// startLine readies stderr for a line of its own. On a terminal, where both streams meet,
// that ends the reply's current line too; stdout itself only ever gets the reply.
func (t *turn) startLine() {
	t.clear()
	if t.midLine && t.stdoutTTY {
		fmt.Fprintln(t.c.stderr)
		t.midLine = false
	}
}

// note writes a line to stderr.
func (t *turn) note(format string, args ...any) {
	t.startLine()
	fmt.Fprintf(t.c.stderr, format+"\n", args...)
}

func (t *turn) text(s string) {
	if s == "" {
		return
	}
	t.clear()
	fmt.Fprint(t.c.stdout, s)
	t.midLine = !strings.HasSuffix(s, "\n")
}

// tick redraws the status line: what the turn waits for, and for how long nothing came.
func (t *turn) tick() {
	if t.asked || (t.midLine && t.stdoutTTY) {
		return
	}
	idle := time.Since(t.lastOutput)
	if idle < time.Second {
		return
	}
	what := "waiting for the model…"
	if len(t.waiting) > 0 {
		what = "waiting for your answer…"
	}
	if line := fmt.Sprintf("%s %ds", what, int(idle/time.Second)); line != t.status {
		fmt.Fprint(t.c.stderr, "\r\x1b[K"+line)
		t.status = line
	}
}

// finish leaves the terminal clean and stops what the turn started.
func (t *turn) finish() {
	if t.status != "" || t.asked {
		t.clear()
	}
	if t.ticker != nil {
		t.ticker.Stop()
	}
	t.stopReading()
}

func (t *turn) interrupt() error {
	if t.cancelled {
		t.note("agenticctl: interrupted again; leaving the turn running")
		return exitError(130)
	}
	t.cancelled = true
	t.note("agenticctl: cancelling the turn (Ctrl-C again to stop waiting)")
	ctx, cancel := t.c.call()
	defer cancel()
	_, err := t.c.client.CancelMessage(ctx, &pb.CancelMessageRequest{SessionId: t.sessionID, MessageId: t.messageID, RequestId: uuid.NewString()})
	if reasonOf(err) == "MESSAGE_NOT_RUNNING" {
		// The turn ended on its own meanwhile; its MESSAGE_END is on the way.
		return nil
	}
	return err
}

// event handles one event, then puts the question back on the screen if output took it.
func (t *turn) event(ev *pb.AgenticEvent) (bool, error) {
	stop, err := t.handle(ev)
	if !stop && err == nil {
		t.ask()
	}
	return stop, err
}

func (t *turn) handle(ev *pb.AgenticEvent) (bool, error) {
	switch p := ev.GetPayload().(type) {
	case *pb.AgenticEvent_MessageDelta:
		if p.MessageDelta.GetMessageId() == t.messageID {
			t.text(p.MessageDelta.GetText())
		}
	case *pb.AgenticEvent_MessageBlock:
		if p.MessageBlock.GetMessageId() != t.messageID {
			break
		}
		if text := p.MessageBlock.GetBlock().GetText(); text != nil {
			t.text(text.GetText())
		} else {
			t.note("%s", describeBlock(p.MessageBlock.GetBlock()))
		}
	case *pb.AgenticEvent_ToolStart:
		if t.ours(p.ToolStart.GetMessageId()) {
			t.note("→ %s", describeTool(p.ToolStart.GetTool()))
		}
	case *pb.AgenticEvent_ToolEnd:
		if t.ours(p.ToolEnd.GetMessageId()) {
			t.note("← %s", describeTool(p.ToolEnd.GetTool()))
		}
	case *pb.AgenticEvent_ToolPermissionRequired:
		return false, t.permission(p.ToolPermissionRequired.GetRequest())
	case *pb.AgenticEvent_ToolPermissionGranted:
		d := p.ToolPermissionGranted
		t.decided(ev, d.GetPermissionId(), "allowed", d.GetOptionId(), d.GetDecidedBy(), d.GetReason())
	case *pb.AgenticEvent_ToolPermissionDenied:
		d := p.ToolPermissionDenied
		t.decided(ev, d.GetPermissionId(), "rejected", d.GetOptionId(), d.GetDecidedBy(), d.GetReason())
	case *pb.AgenticEvent_Error:
		if t.ours(p.Error.GetMessageId()) {
			t.note("error %s: %s", reasonName(p.Error.GetReason()), p.Error.GetMessage())
		}
	case *pb.AgenticEvent_SessionClosed:
		t.note("the session was closed: %s", p.SessionClosed.GetReason())
		t.result = exitError(1)
		return true, nil
	case *pb.AgenticEvent_MessageEnd:
		if p.MessageEnd.GetMessageId() != t.messageID {
			break
		}
		if t.midLine {
			t.clear()
			fmt.Fprintln(t.c.stdout)
			t.midLine = false
		}
		switch reason := p.MessageEnd.GetStopReason(); reason {
		case pb.StopReason_STOP_REASON_END_TURN:
		case pb.StopReason_STOP_REASON_CANCELLED:
			t.note("(cancelled)")
			t.result = exitError(130)
		default:
			t.note("(stopped: %s)", enumName(reason.String(), "STOP_REASON_"))
			t.result = exitError(1)
		}
		return true, nil
	}
	return false, nil
}

func (t *turn) permission(r *pb.PermissionRequest) error {
	if !t.ours(r.GetMessageId()) {
		return nil
	}
	t.note("? permission %s: %s", r.GetPermissionId(), describePermission(r))
	// What the tool would change, before anyone decides.
	if len(r.GetDiffs()) > 0 {
		t.startLine()
		writeDiffs(t.c.stderr, r.GetDiffs(), t.ticker != nil, diffLineLimit)
	}
	switch {
	case t.approve, t.deny:
		done, err := t.c.respond(t.sessionID, r.GetPermissionId(), t.approve, r.GetOptions())
		switch {
		case decidedElsewhere(err):
			// Answered already, by another client or the server's policy: its event follows.
		case err != nil:
			return err
		default:
			t.note("%s", done)
		}
	case t.tty != nil && t.startReading():
		t.asking = append(t.asking, r)
	default:
		t.waiting[r.GetPermissionId()] = true
		t.note("  answer with: agenticctl approve %s %s   (or deny)", t.sessionID, r.GetPermissionId())
	}
	return nil
}

// decidedElsewhere tells whether an answer failed because the request was already
// decided (by another client or the server's policy) or is no longer pending.
func decidedElsewhere(err error) bool {
	switch reasonOf(err) {
	case "PERMISSION_NOT_PENDING", "PERMISSION_ALREADY_DECIDED":
		return true
	}
	return false
}

// decided shows a permission decision. A request still asked on the terminal was
// answered elsewhere: its question is withdrawn, saying by whom.
func (t *turn) decided(ev *pb.AgenticEvent, permissionID, verb, optionID string, by pb.PermissionDecider, reason string) {
	delete(t.waiting, permissionID)
	if t.answered[permissionID] {
		return
	}
	i := t.askingIndex(permissionID)
	if i < 0 {
		t.note("%s %s", enumName(ev.GetType().String(), "AGENTIC_EVENT_TYPE_TOOL_"), describeEvent(ev))
		return
	}
	t.asking = append(t.asking[:i], t.asking[i+1:]...)
	how := "was answered elsewhere: another client " + verb + " it"
	switch by {
	case pb.PermissionDecider_PERMISSION_DECIDER_POLICY:
		how = "was answered by agenticd's policy, which " + verb + " it"
	case pb.PermissionDecider_PERMISSION_DECIDER_CANCELLED:
		how = "was cancelled"
	}
	if optionID != "" {
		how += " (option " + optionID + ")"
	}
	if reason != "" {
		how += ": " + reason
	}
	t.note("  withdrawn: permission %s %s", permissionID, how)
	if len(t.asking) == 0 {
		t.stopReading()
	}
}

func (t *turn) askingIndex(permissionID string) int {
	for i, r := range t.asking {
		if r.GetPermissionId() == permissionID {
			return i
		}
	}
	return -1
}

// startReading starts reading answers from the terminal, if it is not already; it
// reports whether answers can be read there.
func (t *turn) startReading() bool {
	if t.reader != nil {
		return true
	}
	reader, err := startLineReader(t.tty, t.lines)
	if err != nil {
		t.note("agenticctl: cannot read answers from the terminal: %v", err)
		t.tty = nil
		return false
	}
	t.reader = reader
	return true
}

func (t *turn) stopReading() {
	if t.reader != nil {
		t.reader.stop()
		t.reader = nil
	}
}

// ask shows the oldest unanswered request's options (once) and its question.
func (t *turn) ask() {
	if len(t.asking) == 0 || t.asked {
		return
	}
	r := t.asking[0]
	options := choices(r)
	if t.listed != r.GetPermissionId() {
		t.note("  answer permission %s here, or from another terminal with agenticctl approve/deny:", r.GetPermissionId())
		for i, o := range options {
			t.note("  %d) %s", i+1, describeOption(o))
		}
		t.listed = r.GetPermissionId()
	}
	t.startLine()
	fmt.Fprintf(t.c.stderr, "  your answer [1-%d]: ", len(options))
	t.asked = true
}

// input takes a line typed at the terminal as the answer to the oldest request asked.
func (t *turn) input(l terminalLine) error {
	t.asked = false // the Enter that ended the line moved the cursor to a new one
	if l.eof || l.err != nil {
		t.stopReading()
		t.tty = nil
		for _, r := range t.asking {
			t.waiting[r.GetPermissionId()] = true
			t.note("  no more input; answer with: agenticctl approve %s %s   (or deny)", t.sessionID, r.GetPermissionId())
		}
		t.asking = nil
		return nil
	}
	if len(t.asking) == 0 {
		return nil
	}
	r := t.asking[0]
	options := choices(r)
	n, err := strconv.Atoi(strings.TrimSpace(l.text))
	if err != nil || n < 1 || n > len(options) {
		t.note("  type a number from 1 to %d (Ctrl-C cancels the turn)", len(options))
		t.ask()
		return nil
	}
	o := options[n-1]
	t.asking = t.asking[1:]
	done, err := t.c.answerWith(t.sessionID, r.GetPermissionId(), o)
	switch {
	case decidedElsewhere(err):
		t.note("  permission %s was answered elsewhere before your answer arrived", r.GetPermissionId())
	case err != nil:
		return err
	default:
		t.answered[r.GetPermissionId()] = true
		t.note("%s", done)
	}
	if len(t.asking) == 0 {
		t.stopReading()
	}
	t.ask()
	return nil
}

// choices are a request's options in the order allow once, allow always, reject once,
// reject always (others last), as the request offers them.
func choices(r *pb.PermissionRequest) []*pb.PermissionOption {
	options := append([]*pb.PermissionOption(nil), r.GetOptions()...)
	rank := func(o *pb.PermissionOption) int {
		if k := o.GetKind(); k != pb.PermissionOptionKind_PERMISSION_OPTION_KIND_UNSPECIFIED {
			return int(k)
		}
		return len(pb.PermissionOptionKind_name)
	}
	sort.SliceStable(options, func(i, j int) bool { return rank(options[i]) < rank(options[j]) })
	return options
}

func describeOption(o *pb.PermissionOption) string {
	s := strings.ReplaceAll(enumName(o.GetKind().String(), "PERMISSION_OPTION_KIND_"), "_", " ")
	if o.GetKind() == pb.PermissionOptionKind_PERMISSION_OPTION_KIND_UNSPECIFIED {
		s = "other"
	}
	if o.GetName() != "" {
		s += fmt.Sprintf(" %q", o.GetName())
	}
	return s + " (option " + o.GetOptionId() + ")"
}

// answerLine says what an answer to a permission request did, e.g.
// `allowed once: request r1 of session s1 (option allow_once "Allow")`. o may be nil when
// the request's options were not known.
func answerLine(sessionID, permissionID string, kind pb.PermissionOptionKind, o *pb.PermissionOption) string {
	did := map[pb.PermissionOptionKind]string{
		pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE:    "allowed once",
		pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ALWAYS:  "allowed always",
		pb.PermissionOptionKind_PERMISSION_OPTION_KIND_REJECT_ONCE:   "rejected once",
		pb.PermissionOptionKind_PERMISSION_OPTION_KIND_REJECT_ALWAYS: "rejected always",
	}[kind]
	if did == "" {
		did = "answered"
	}
	s := fmt.Sprintf("%s: request %s of session %s", did, permissionID, sessionID)
	if o != nil {
		s += " (option " + o.GetOptionId()
		if o.GetName() != "" {
			s += fmt.Sprintf(" %q", o.GetName())
		}
		s += ")"
	}
	return s
}
