package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// frameOrErr is one result of a stream's Recv.
type frameOrErr struct {
	frame *pb.SubscribeResponse
	err   error
}

// loop is what follow runs, all on one goroutine so that output never interleaves: the
// stream's events, and SIGINTs, clock ticks and lines typed at the terminal.
type loop struct {
	event func(*pb.AgenticEvent) (stop bool, err error)
	// caughtUp, when set, is called when the stream's replay is over (once per stream).
	caughtUp func(sequence uint64)
	// interrupt, when set, is called on each SIGINT instead of its default.
	interrupt func() error
	// tick and input may be nil (never ready).
	tick    <-chan time.Time
	onTick  func()
	input   <-chan terminalLine
	onInput func(terminalLine) error
}

// terminalLine is one line typed at the terminal, or its end.
type terminalLine struct {
	text string
	eof  bool
	err  error
}

// follow subscribes and hands each event to l.event until it says stop, the stream fails,
// or ctx ends. It keeps req's start at the point the stream has seen (events, bookmarks
// and the caught-up marker move it), and when the server ends the stream because this
// client fell behind, it resumes where the server says (as long as each stream made
// progress).
func (c *cli) follow(ctx context.Context, req *pb.SubscribeRequest, l *loop) error {
	sigs := make(chan os.Signal, 1)
	if l.interrupt != nil {
		signal.Notify(sigs, os.Interrupt)
		defer signal.Stop(sigs)
	}
	for {
		streamCtx, cancel := context.WithCancel(ctx)
		frames := make(chan frameOrErr)
		readerDone := make(chan struct{})
		stream, err := c.client.Subscribe(streamCtx, req)
		if err != nil {
			cancel()
			return err
		}
		go func() {
			defer close(readerDone)
			for {
				frame, err := stream.Recv()
				select {
				case frames <- frameOrErr{frame, err}:
				case <-streamCtx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
		resume, err := c.drain(frames, sigs, req, l)
		cancel()
		<-readerDone
		if !resume {
			return err
		}
	}
}

// drain handles one stream's frames; it reports whether to resubscribe (req updated).
func (c *cli) drain(frames <-chan frameOrErr, sigs <-chan os.Signal, req *pb.SubscribeRequest, l *loop) (bool, error) {
	start := req.GetAfterSequence()
	for {
		select {
		case <-sigs:
			if err := l.interrupt(); err != nil {
				return false, err
			}
		case <-l.tick:
			l.onTick()
		case line := <-l.input:
			if err := l.onInput(line); err != nil {
				return false, err
			}
		case r := <-frames:
			if r.err != nil {
				return c.resume(r.err, req, start)
			}
			if stop, err := handleFrame(r.frame, req, l); stop || err != nil {
				return false, err
			}
		}
	}
}

// handleFrame hands a frame's events to l and moves req's start past what the frame
// covers; heartbeats only keep the stream open.
func handleFrame(frame *pb.SubscribeResponse, req *pb.SubscribeRequest, l *loop) (bool, error) {
	switch f := frame.GetFrame().(type) {
	case *pb.SubscribeResponse_Events:
		for _, ev := range f.Events.GetEvents() {
			resumeAfter(req, ev.GetSequence())
			if stop, err := l.event(ev); stop || err != nil {
				return stop, err
			}
		}
	case *pb.SubscribeResponse_Bookmark:
		resumeAfter(req, f.Bookmark.GetSequence())
	case *pb.SubscribeResponse_CaughtUp:
		resumeAfter(req, f.CaughtUp.GetSequence())
		if l.caughtUp != nil {
			l.caughtUp(f.CaughtUp.GetSequence())
		}
	}
	return false, nil
}

// resumeAfter makes a later subscription with req start after sequence (a stream that
// started with oldest_held resumes from a sequence too).
func resumeAfter(req *pb.SubscribeRequest, sequence uint64) {
	if sequence > req.GetAfterSequence() {
		req.Start = &pb.SubscribeRequest_AfterSequence{AfterSequence: sequence}
	}
}

// Pauses before a stream that ended UNAVAILABLE is opened again: the first, doubling up
// to the last; unavailableFor is how long it is tried without any progress.
const (
	unavailableFirst = 500 * time.Millisecond
	unavailableLast  = 5 * time.Second
	unavailableFor   = 5 * time.Minute
)

// resume decides what to do when a stream that started after sequence start failed.
func (c *cli) resume(err error, req *pb.SubscribeRequest, start uint64) (bool, error) {
	last, overflow := overflowPoint(err)
	if status.Code(err) == codes.Unavailable {
		// The server restarts, or its database is away for a while: the turn may well go
		// on, so the stream is opened again after what it saw, for as long as that takes.
		if req.GetAfterSequence() > start || c.unavailableSince.IsZero() {
			c.unavailableSince, c.unavailablePause = time.Now(), unavailableFirst
		}
		if time.Since(c.unavailableSince) < unavailableFor {
			fmt.Fprintf(c.stderr, "agenticctl: the event stream ended (%s); resuming after %d in %s\n", status.Convert(err).Message(), req.GetAfterSequence(), c.unavailablePause)
			time.Sleep(c.unavailablePause)
			c.unavailablePause = min(2*c.unavailablePause, unavailableLast)
			return true, nil
		}
	}
	switch {
	case overflow && last > start:
		req.Start = &pb.SubscribeRequest_AfterSequence{AfterSequence: last}
		fmt.Fprintf(c.stderr, "agenticctl: fell behind the event stream; resuming after %d\n", last)
		return true, nil
	case overflow:
		return false, fmt.Errorf("this client fell behind the event stream again without getting any event (at sequence %d); it cannot keep up here, so it stops: %w", last, err)
	case status.Code(err) == codes.ResourceExhausted:
		return false, fmt.Errorf("an event was larger than this client accepts, or the connection ran out of a resource (agenticd keeps its events under 4 MiB; is a proxy in between?): %w", err)
	}
	return false, err
}

// overflowPoint recognises the server ending a stream because this client fell behind: a
// RESOURCE_EXHAUSTED carrying agenticd's SUBSCRIBER_TOO_SLOW ErrorInfo, whose metadata
// last_sequence is where to resume. A RESOURCE_EXHAUSTED without it comes from elsewhere,
// such as this client's gRPC library refusing a message over its size limit, and resuming
// would fail the same way again.
func overflowPoint(err error) (uint64, bool) {
	info := errorInfo(err)
	if status.Code(err) != codes.ResourceExhausted || info.GetReason() != "SUBSCRIBER_TOO_SLOW" {
		return 0, false
	}
	last, perr := strconv.ParseUint(info.GetMetadata()["last_sequence"], 10, 64)
	return last, perr == nil
}

func cmdSubscribe(c *cli, args []string) error {
	fs := flag.NewFlagSet("subscribe", flag.ContinueOnError)
	var sessions, agents stringList
	fs.Var(&sessions, "session", "only this session (repeatable)")
	fs.Var(&agents, "agent", "only this agent's sessions (repeatable)")
	after := fs.Uint64("after", 0, "replay held events after this sequence first (0: live only)")
	oldest := fs.Bool("oldest", false, "replay every event agenticd still holds first")
	asJSON := fs.Bool("json", false, "print each event as one line of JSON")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	req := &pb.SubscribeRequest{SessionIds: sessions, AgentIds: agents}
	switch {
	case *oldest && *after > 0:
		return usagef("--after and --oldest exclude each other")
	case *oldest:
		req.Start = &pb.SubscribeRequest_OldestHeld{OldestHeld: true}
	case *after > 0:
		req.Start = &pb.SubscribeRequest_AfterSequence{AfterSequence: *after}
	}
	dim := isTerminal(c.stdout)
	l := &loop{event: func(ev *pb.AgenticEvent) (bool, error) {
		if *asJSON {
			line, err := protojson.Marshal(ev)
			if err != nil {
				return true, err
			}
			_, err = fmt.Fprintln(c.stdout, string(line))
			return false, err
		}
		_, err := fmt.Fprintln(c.stdout, eventLine(ev, dim))
		return false, err
	}}
	if req.GetStart() != nil {
		l.caughtUp = func(sequence uint64) {
			fmt.Fprintf(c.stderr, "agenticctl: replayed the held events up to %d; live from here\n", sequence)
		}
	}
	return c.follow(context.Background(), req, l)
}

// eventLine is an event as subscribe prints it: sequence, time, session (or agent), type
// and what happened. Events a LoadSession replays are history, not news: they say so, and
// on a terminal they are dimmed.
func eventLine(ev *pb.AgenticEvent, dim bool) string {
	about := ev.GetSessionId()
	if about == "" {
		about = "agent " + ev.GetAgentId()
	}
	kind := enumName(ev.GetType().String(), "AGENTIC_EVENT_TYPE_")
	if ev.GetReplay() {
		kind += " (replay)"
	}
	line := fmt.Sprintf("#%d %s %s %s %s", ev.GetSequence(), ev.GetEventTime().AsTime().Local().Format("15:04:05.000"),
		about, kind, describeEvent(ev))
	if ev.GetReplay() && dim {
		return "\x1b[2m" + line + "\x1b[0m"
	}
	return line
}

func describeEvent(ev *pb.AgenticEvent) string {
	switch p := ev.GetPayload().(type) {
	case *pb.AgenticEvent_SessionCreated:
		s := p.SessionCreated.GetSession()
		return fmt.Sprintf("agent=%s workspace=%s", s.GetAgentId(), s.GetWorkspace())
	case *pb.AgenticEvent_SessionReady:
		return fmt.Sprintf("messages=%d", p.SessionReady.GetMessageCount())
	case *pb.AgenticEvent_SessionUpdated:
		return "changed=" + strings.Join(p.SessionUpdated.GetUpdateMask().GetPaths(), ",")
	case *pb.AgenticEvent_SessionClosed:
		return p.SessionClosed.GetReason()
	case *pb.AgenticEvent_MessageDelta:
		return fmt.Sprintf("%s %s %q", p.MessageDelta.GetMessageId(), enumName(p.MessageDelta.GetRole().String(), "MESSAGE_ROLE_"), p.MessageDelta.GetText())
	case *pb.AgenticEvent_MessageBlock:
		return p.MessageBlock.GetMessageId() + " " + describeBlock(p.MessageBlock.GetBlock())
	case *pb.AgenticEvent_MessageEnd:
		return fmt.Sprintf("%s %s", p.MessageEnd.GetMessageId(), enumName(p.MessageEnd.GetStopReason().String(), "STOP_REASON_"))
	case *pb.AgenticEvent_ToolStart:
		return describeTool(p.ToolStart.GetTool())
	case *pb.AgenticEvent_ToolRunning:
		return describeTool(p.ToolRunning.GetTool())
	case *pb.AgenticEvent_ToolEnd:
		return describeTool(p.ToolEnd.GetTool())
	case *pb.AgenticEvent_ToolPermissionRequired:
		r := p.ToolPermissionRequired.GetRequest()
		return r.GetPermissionId() + " " + describePermission(r)
	case *pb.AgenticEvent_ToolPermissionGranted:
		d := p.ToolPermissionGranted
		return strings.TrimSpace(fmt.Sprintf("%s option=%s by=%s %s", d.GetPermissionId(), d.GetOptionId(), enumName(d.GetDecidedBy().String(), "PERMISSION_DECIDER_"), d.GetReason()))
	case *pb.AgenticEvent_ToolPermissionDenied:
		d := p.ToolPermissionDenied
		return strings.TrimSpace(fmt.Sprintf("%s option=%s by=%s %s", d.GetPermissionId(), d.GetOptionId(), enumName(d.GetDecidedBy().String(), "PERMISSION_DECIDER_"), d.GetReason()))
	case *pb.AgenticEvent_StatusChanged:
		return strings.TrimSpace(enumName(p.StatusChanged.GetStatus().String(), "SESSION_STATUS_") + " " + p.StatusChanged.GetReason())
	case *pb.AgenticEvent_Error:
		return reasonName(p.Error.GetReason()) + ": " + p.Error.GetMessage()
	case *pb.AgenticEvent_ElicitationRequired:
		return describeElicitation(p.ElicitationRequired.GetRequest())
	case *pb.AgenticEvent_ElicitationResolved:
		return describeResolution(p.ElicitationResolved)
	case *pb.AgenticEvent_AgentStatusChanged:
		a := p.AgentStatusChanged.GetAgent()
		return strings.TrimSpace(fmt.Sprintf("%s is %s %s", a.GetAgentId(), enumName(a.GetStatus().String(), "AGENT_STATUS_"), a.GetStatusReason()))
	}
	return ""
}

func describeTool(t *pb.ToolCall) string {
	name := t.GetTitle()
	if name == "" {
		name = t.GetToolName()
	}
	s := fmt.Sprintf("%s [%s, %s]", name, enumName(t.GetKind().String(), "TOOL_KIND_"), enumName(t.GetStatus().String(), "TOOL_STATUS_"))
	if t.GetError() != "" {
		s += ": " + t.GetError()
	}
	return s
}

func describePermission(r *pb.PermissionRequest) string {
	var b strings.Builder
	b.WriteString(r.GetToolName())
	if r.GetDescription() != "" {
		b.WriteString(" — " + r.GetDescription())
	}
	if ci := r.GetCommandInfo(); ci != nil {
		fmt.Fprintf(&b, " (command %q", ci.GetCommand())
		if ci.GetCwd() != "" {
			b.WriteString(" in " + ci.GetCwd())
		}
		fmt.Fprintf(&b, ", risk %s", enumName(ci.GetRiskLevel().String(), "RISK_LEVEL_"))
		if ci.GetReason() != "" {
			b.WriteString(": " + ci.GetReason())
		}
		b.WriteString(")")
	}
	if len(r.GetPaths()) > 0 {
		b.WriteString(" paths: " + strings.Join(r.GetPaths(), ", "))
	}
	var opts []string
	for _, o := range r.GetOptions() {
		opts = append(opts, fmt.Sprintf("%s=%s", o.GetOptionId(), enumName(o.GetKind().String(), "PERMISSION_OPTION_KIND_")))
	}
	if len(opts) > 0 {
		b.WriteString(" options: " + strings.Join(opts, " "))
	}
	return b.String()
}

func describeBlock(b *pb.Block) string {
	switch c := b.GetContent().(type) {
	case *pb.Block_Text:
		return c.Text.GetText()
	case *pb.Block_Reasoning:
		return "[thinking] " + c.Reasoning.GetText()
	case *pb.Block_Tool:
		return "[tool] " + describeTool(c.Tool)
	case *pb.Block_Error:
		return fmt.Sprintf("[error %s] %s", reasonName(c.Error.GetReason()), c.Error.GetMessage())
	case *pb.Block_Image:
		return "[image " + c.Image.GetMimeType() + "]"
	case *pb.Block_Action:
		return fmt.Sprintf("[%s] %s", c.Action.GetActionType(), c.Action.GetDescription())
	case *pb.Block_Search:
		return fmt.Sprintf("[search] %s (%d results)", c.Search.GetQuery(), len(c.Search.GetResults()))
	case *pb.Block_McpUiResource:
		return "[ui] " + c.McpUiResource.GetUri()
	case *pb.Block_Plan:
		var lines []string
		for _, e := range c.Plan.GetEntries() {
			lines = append(lines, fmt.Sprintf("  - [%s] %s", enumName(e.GetStatus().String(), "PLAN_ENTRY_STATUS_"), e.GetContent()))
		}
		return "[plan]\n" + strings.Join(lines, "\n")
	case *pb.Block_Diff:
		return "[diff] " + c.Diff.GetPath()
	case *pb.Block_Terminal:
		return fmt.Sprintf("[terminal %s] %s", c.Terminal.GetTerminalId(), c.Terminal.GetCommand())
	case *pb.Block_Resource:
		return "[resource] " + c.Resource.GetUri()
	}
	return "[empty block]"
}
