package deepchat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

func TestPlainTextTurnIsCommittedBeforeMessageEnd(t *testing.T) {
	h := newHarness(t)
	info := h.createSession("")
	if info.CurrentModeID != ModeBalanced || info.CurrentModelID != "fake-small" || info.Status != presenters.SessionIdle {
		t.Fatalf("new session = %+v", info)
	}
	h.llm.script(textReply("Hel", "lo, ", "world"))

	// At MESSAGE_END the finished message must already be in SQLite.
	var atEnd []presenters.Message
	h.rec.setHook(func(ev presenters.Event) {
		if _, ok := ev.Payload.(presenters.MessageEndPayload); ok {
			atEnd, _ = h.store.Messages(context.Background(), ev.SessionID, presenters.MessageQuery{})
		}
	})
	res, end := h.turn(info.SessionID, "Say hello")
	h.rec.setHook(nil)

	if end.StopReason != presenters.StopEndTurn || end.Role != presenters.RoleAssistant || end.Usage == nil || !reportedAs(end.Usage.InputTokens, 10) || !reportedAs(end.Usage.OutputTokens, 3) {
		t.Fatalf("MESSAGE_END = %+v", end)
	}
	if len(atEnd) != 2 || atEnd[1].ID != res.MessageID || atEnd[1].Status != presenters.MessageComplete || atEnd[1].Blocks[0].Text != "Hello, world" {
		t.Fatalf("stored at MESSAGE_END: %+v", atEnd)
	}

	var kinds []string
	for _, ev := range h.rec.all() {
		if ev.SessionID != info.SessionID || ev.AgentID != "deepchat.fake.test" {
			t.Fatalf("event for %s/%s", ev.AgentID, ev.SessionID)
		}
		kinds = append(kinds, describe(ev))
	}
	want := "created user_delta user_end status:generating updated delta delta delta end:end_turn updated status:idle"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	deltas := ofType[presenters.MessageDeltaPayload](h.rec.all())
	if deltas[0].Text != "Say hello" || deltas[0].MessageID != res.UserMessageID || deltas[0].Role != presenters.RoleUser {
		t.Fatalf("the user's message is not echoed first: %+v", deltas[0])
	}
	if deltas[1].Text != "Hel" || deltas[1].MessageID != res.MessageID || deltas[1].Role != presenters.RoleAssistant {
		t.Fatalf("first reply delta = %+v", deltas[1])
	}
	updates := ofType[presenters.SessionUpdatedPayload](h.rec.all())
	if updates[0].Patch.Title == nil || *updates[0].Patch.Title != "Say hello" {
		t.Fatalf("title update = %+v", updates[0].Patch)
	}
	if u := updates[1].Patch.Usage; u == nil || !reportedAs(u.TotalTokens, 13) {
		t.Fatalf("usage update = %+v", updates[1].Patch)
	}

	reqs := h.llm.requestsSoFar()
	if len(reqs) != 1 {
		t.Fatalf("%d provider requests", len(reqs))
	}
	req := reqs[0]
	if req.auth != "Bearer sk-test-123" || req.body.Model != "fake-small" || !req.body.Stream || len(req.body.Tools) != len(toolSpecs) {
		t.Fatalf("request: auth %q model %q stream %v tools %d", req.auth, req.body.Model, req.body.Stream, len(req.body.Tools))
	}
	if n := len(req.body.Messages); n != 2 || req.body.Messages[0].Role != "system" || req.body.Messages[1].Content != "Say hello" {
		t.Fatalf("request messages = %+v", req.body.Messages)
	}

	got, err := h.p.GetSession(context.Background(), info.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != presenters.SessionIdle || got.MessageCount != 2 || !reportedAs(got.Usage.TotalTokens, 13) || got.Title != "Say hello" || got.MessageInFlight != "" {
		t.Fatalf("GetSession after turn = %+v", got)
	}
	msgs := h.messages(info.SessionID)
	if msgs[0].ID != res.UserMessageID || msgs[0].Role != presenters.RoleUser || msgs[0].Blocks[0].Text != "Say hello" {
		t.Fatalf("user message = %+v", msgs[0])
	}
	if msgs[1].StopReason != presenters.StopEndTurn || msgs[1].Usage == nil || !reportedAs(msgs[1].Usage.TotalTokens, 13) {
		t.Fatalf("assistant message = %+v", msgs[1])
	}
}

func TestReasoningBecomesReasoningBlocks(t *testing.T) {
	h := newHarness(t)
	info := h.createSession("")
	h.llm.script(fakeReply{events: []string{
		reasoningEvent("reasoning_content", "Let me "),
		reasoningEvent("reasoning", "think."),
		textEvent("Answer"),
		finishEvent("stop"),
	}})
	res, _ := h.turn(info.SessionID, "q")
	var chunks []string
	for _, b := range ofType[presenters.MessageBlockPayload](h.rec.all()) {
		if b.Block.Type != presenters.BlockReasoning || b.MessageID != res.MessageID {
			t.Fatalf("block event = %+v", b)
		}
		chunks = append(chunks, b.Block.Text)
	}
	if strings.Join(chunks, "|") != "Let me |think." {
		t.Fatalf("reasoning chunks = %q", chunks)
	}
	blocks := h.messages(info.SessionID)[1].Blocks
	want := []presenters.Block{{Type: presenters.BlockReasoning, Text: "Let me think."}, {Type: presenters.BlockText, Text: "Answer"}}
	if !reflect.DeepEqual(blocks, want) {
		t.Fatalf("stored blocks = %+v", blocks)
	}
	// Reasoning is not sent back to the model on the next turn.
	h.llm.script(textReply("ok"))
	h.turn(info.SessionID, "again")
	reqs := h.llm.requestsSoFar()
	for _, m := range reqs[1].body.Messages {
		if s, _ := m.Content.(string); strings.Contains(s, "think") {
			t.Fatalf("reasoning sent back: %+v", m)
		}
	}
}

func TestToolCallSplitAcrossChunksRunsAndFeedsBack(t *testing.T) {
	h := newHarness(t)
	h.writeFile("notes/todo.txt", "line one\nline two\n")
	info := h.createSession(ModeBalanced)
	h.llm.script(
		fakeReply{events: append(append([]string{textEvent("Reading. ")},
			toolEvents(0, "call_r1", "read_file", `{"pa`, `th": "notes/`, `todo.txt"}`)...), finishEvent("tool_calls"), usageEvent(7, 2))},
		textReply("It says line one."),
	)
	res, end := h.turn(info.SessionID, "what is in notes/todo.txt?")
	if end.StopReason != presenters.StopEndTurn || !reportedAs(end.Usage.InputTokens, 17) {
		t.Fatalf("end = %+v", end)
	}
	if h.rec.summary() != "created user_delta user_end status:generating updated delta tool_start:read_file tool_running:read_file tool_end:read_file:completed delta end:end_turn updated status:idle" {
		t.Fatalf("events: %s", h.rec.summary())
	}
	endTool := ofType[presenters.ToolEndPayload](h.rec.all())[0].Tool
	if endTool.ToolID != "call_r1" || endTool.Kind != presenters.ToolRead || string(endTool.Arguments) != `{"path": "notes/todo.txt"}` ||
		len(endTool.Locations) != 1 || !strings.HasSuffix(endTool.Locations[0].Path, "/notes/todo.txt") {
		t.Fatalf("tool = %+v", endTool)
	}
	var result string
	if err := json.Unmarshal(endTool.Result, &result); err != nil || result != "line one\nline two\n" {
		t.Fatalf("tool result = %s (%v)", endTool.Result, err)
	}

	reqs := h.llm.requestsSoFar()
	second := reqs[1].body.Messages
	// system, user, assistant(text + tool_calls), tool
	if len(second) != 4 || second[2].Role != "assistant" || second[2].Content != "Reading. " || len(second[2].ToolCalls) != 1 ||
		second[2].ToolCalls[0].ID != "call_r1" || second[2].ToolCalls[0].Function.Arguments != `{"path": "notes/todo.txt"}` {
		t.Fatalf("second request = %+v", second)
	}
	if second[3].Role != "tool" || second[3].ToolCallID != "call_r1" || second[3].Content != "line one\nline two\n" {
		t.Fatalf("tool message = %+v", second[3])
	}

	blocks := h.messages(info.SessionID)[1].Blocks
	if len(blocks) != 3 || blocks[0].Text != "Reading. " || blocks[1].Tool.Status != presenters.ToolCompleted || blocks[2].Text != "It says line one." {
		t.Fatalf("stored blocks = %+v", blocks)
	}
	// The stored history reproduces the same conversation for the next turn.
	h.llm.script(textReply("ok"))
	h.turn(info.SessionID, "thanks")
	third := h.llm.requestsSoFar()[2].body.Messages
	if len(third) != 6 || third[3].ToolCallID != "call_r1" || third[4].Content != "It says line one." || third[5].Content != "thanks" {
		t.Fatalf("third request = %+v", third)
	}
	_ = res
}

func TestParallelToolCallsRunInOrder(t *testing.T) {
	h := newHarness(t)
	h.writeFile("a.go", "package a\nfunc Alpha() {}\n")
	h.writeFile("b.go", "package b\nfunc Beta() {}\n")
	info := h.createSession(ModeBalanced)
	first := toolEvents(0, "call_list", "list_directory", `{}`)
	second := toolEvents(1, "call_grep", "search_files", `{"pattern":`, `"func B"}`)
	// Interleave the two calls' chunks, as parallel tool calls arrive.
	events := []string{first[0], second[0], second[1], first[1], second[2], finishEvent("tool_calls")}
	h.llm.script(fakeReply{events: events}, textReply("done"))
	h.turn(info.SessionID, "look around")

	ends := ofType[presenters.ToolEndPayload](h.rec.all())
	if len(ends) != 2 || ends[0].Tool.ToolID != "call_list" || ends[1].Tool.ToolID != "call_grep" || ends[1].Tool.Kind != presenters.ToolSearch {
		t.Fatalf("tool ends = %+v", ends)
	}
	tools := toolMessages(h.llm.requestsSoFar()[1].body)
	if len(tools) != 2 || tools[0].ToolCallID != "call_list" || tools[1].ToolCallID != "call_grep" {
		t.Fatalf("tool results = %+v", tools)
	}
	if s := tools[0].Content.(string); !strings.Contains(s, "a.go (") || !strings.Contains(s, "b.go (") {
		t.Fatalf("listing = %q", s)
	}
	if s := tools[1].Content.(string); s != "b.go:2: func Beta() {}\n" {
		t.Fatalf("search = %q", s)
	}
}

func TestWriteAskedUnderBalancedAndGranted(t *testing.T) {
	h := newHarness(t)
	h.writeFile("main.go", "package main\n\nfunc main() {}\n")
	info := h.createSession(ModeBalanced)
	h.llm.script(
		toolReply("call_e", "edit_file", `{"path":"main.go","old_string":"func main() {}","new_string":"func main() { println(1) }"}`),
		textReply("Edited."),
	)
	res := h.send(info.SessionID, "edit main")
	req := h.rec.waitFor(t, "permission required", isPermissionRequired).Payload.(presenters.PermissionRequiredPayload).Request
	if req.ToolID != "call_e" || req.ToolName != "edit_file" || req.PermissionType != presenters.PermissionWrite || !req.Rememberable ||
		req.MessageID != res.MessageID || len(req.Paths) != 1 || !strings.HasSuffix(req.Paths[0], "/main.go") {
		t.Fatalf("request = %+v", req)
	}
	// The person sees the change before answering.
	if len(req.Diffs) != 1 || req.Diffs[0].Path != req.Paths[0] || req.Diffs[0].OldText != "package main\n\nfunc main() {}\n" ||
		req.Diffs[0].NewText != "package main\n\nfunc main() { println(1) }\n" {
		t.Fatalf("request diffs = %+v", req.Diffs)
	}
	var opts []string
	for _, o := range req.Options {
		opts = append(opts, o.ID+"="+string(o.Kind))
	}
	if strings.Join(opts, ",") != "allow_once=allow_once,allow_always=allow_always,reject_once=reject_once" {
		t.Fatalf("options = %v", opts)
	}
	// While waiting: paused, with the request listed, and nothing written yet.
	got, _ := h.p.GetSession(context.Background(), info.SessionID)
	if got.Status != presenters.SessionPaused || len(got.PendingPermissions) != 1 || got.MessageInFlight != res.MessageID {
		t.Fatalf("session while waiting = %+v", got)
	}
	if content, _ := h.readFile("main.go"); strings.Contains(content, "println") {
		t.Fatal("file changed before permission")
	}
	if _, err := h.p.SendMessage(context.Background(), info.SessionID, presenters.TextContent("x"), presenters.SendOptions{}); !errors.Is(err, presenters.ErrSessionBusy) {
		t.Fatalf("SendMessage during a turn: %v", err)
	}
	err := h.p.RespondPermission(context.Background(), info.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: "maybe"})
	if !errors.Is(err, presenters.ErrInvalidArgument) {
		t.Fatalf("unknown option: %v", err)
	}
	h.respond(info.SessionID, req.RequestID, OptionAllowOnce)
	err = h.p.RespondPermission(context.Background(), info.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: OptionRejectOnce})
	if !errors.Is(err, presenters.ErrNotFound) {
		t.Fatalf("second answer: %v", err)
	}
	h.waitEnd(res.MessageID)

	if content, _ := h.readFile("main.go"); content != "package main\n\nfunc main() { println(1) }\n" {
		t.Fatalf("file = %q", content)
	}
	granted := ofType[presenters.PermissionGrantedPayload](h.rec.all())
	if len(granted) != 1 || granted[0].OptionID != OptionAllowOnce || granted[0].DecidedBy != presenters.DecidedByUser || granted[0].ToolID != "call_e" {
		t.Fatalf("granted = %+v", granted)
	}
	var statuses []string
	for _, s := range ofType[presenters.StatusChangedPayload](h.rec.all()) {
		statuses = append(statuses, string(s.Status))
	}
	if strings.Join(statuses, ",") != "generating,paused,generating,idle" {
		t.Fatalf("statuses = %v", statuses)
	}
	end := ofType[presenters.ToolEndPayload](h.rec.all())[0].Tool
	if end.Status != presenters.ToolCompleted || len(end.Content) != 1 || end.Content[0].Diff == nil ||
		end.Content[0].Diff.OldText != "package main\n\nfunc main() {}\n" || !strings.Contains(end.Content[0].Diff.NewText, "println(1)") {
		t.Fatalf("edit tool end = %+v", end)
	}
	blocks := h.messages(info.SessionID)[1].Blocks
	if len(blocks) != 3 || blocks[1].Type != presenters.BlockAction || blocks[1].Action.ActionType != "permission_request" ||
		blocks[1].Action.Permission.RequestID != req.RequestID {
		t.Fatalf("stored blocks = %+v", blocks)
	}
}

func TestWriteAskedWithTheDiffOfTheFileAsItIs(t *testing.T) {
	h := newHarness(t)
	h.writeFile("notes.txt", "old\n")
	info := h.createSession(ModeBalanced)
	h.llm.script(
		toolReply("call_w", "write_file", `{"path":"notes.txt","content":"new\n"}`),
		toolReply("call_n", "write_file", `{"path":"fresh.txt","content":"hi\n"}`),
		toolReply("call_x", "edit_file", `{"path":"notes.txt","old_string":"absent","new_string":"x"}`),
		textReply("Done."),
	)
	res := h.send(info.SessionID, "write")
	var diffs [][]presenters.DiffBlock
	for _, id := range []string{"call_w", "call_n", "call_x"} {
		ev := h.rec.waitFor(t, "permission required for "+id, func(ev presenters.Event) bool {
			p, ok := ev.Payload.(presenters.PermissionRequiredPayload)
			return ok && p.Request.ToolID == id
		})
		req := ev.Payload.(presenters.PermissionRequiredPayload).Request
		diffs = append(diffs, req.Diffs)
		h.respond(info.SessionID, req.RequestID, OptionAllowOnce)
	}
	h.waitEnd(res.MessageID)
	if len(diffs[0]) != 1 || !strings.HasSuffix(diffs[0][0].Path, "/notes.txt") || diffs[0][0].OldText != "old\n" || diffs[0][0].NewText != "new\n" {
		t.Fatalf("overwrite diffs = %+v", diffs[0])
	}
	if len(diffs[1]) != 1 || diffs[1][0].OldText != "" || diffs[1][0].NewText != "hi\n" {
		t.Fatalf("new file diffs = %+v", diffs[1])
	}
	// An edit that does not apply has nothing to show; it fails when it runs.
	if len(diffs[2]) != 0 {
		t.Fatalf("diffs of an edit that does not apply = %+v", diffs[2])
	}
}

func TestWriteNotAskedUnderPermissive(t *testing.T) {
	h := newHarness(t)
	info := h.createSession(ModePermissive)
	h.llm.script(toolReply("call_w", "write_file", `{"path":"out/new.txt","content":"hi\n"}`), textReply("Written."))
	h.turn(info.SessionID, "write it")
	if n := len(ofType[presenters.PermissionRequiredPayload](h.rec.all())); n != 0 {
		t.Fatalf("%d permission requests under permissive", n)
	}
	if content, ok := h.readFile("out/new.txt"); !ok || content != "hi\n" {
		t.Fatalf("file = %q, %v", content, ok)
	}
	end := ofType[presenters.ToolEndPayload](h.rec.all())[0].Tool
	if end.Kind != presenters.ToolEdit || end.Content[0].Diff.OldText != "" || end.Content[0].Diff.NewText != "hi\n" {
		t.Fatalf("write tool end = %+v", end)
	}
}

func TestDeniedToolReturnsDenialAndTheModelContinues(t *testing.T) {
	h := newHarness(t)
	info := h.createSession(ModeBalanced)
	h.llm.script(toolReply("call_rm", "run_command", `{"command":"rm -rf build"}`), textReply("OK, I will not delete it."))
	h.writeFile("build/x.o", "obj")
	res := h.send(info.SessionID, "clean up")
	req := h.rec.waitFor(t, "permission required", isPermissionRequired).Payload.(presenters.PermissionRequiredPayload).Request
	if req.PermissionType != presenters.PermissionCommand || req.CommandInfo == nil || req.CommandInfo.RiskLevel != presenters.RiskHigh ||
		req.CommandInfo.Signature != "rm -rf" || req.CommandInfo.BaseCommand != "rm" || req.CommandInfo.Cwd != h.workspace || len(req.Diffs) != 0 ||
		strings.Contains(req.Description, "risk") {
		t.Fatalf("request = %+v / %+v", req, req.CommandInfo)
	}
	h.respond(info.SessionID, req.RequestID, OptionRejectOnce)
	end := h.waitEnd(res.MessageID)
	if end.StopReason != presenters.StopEndTurn {
		t.Fatalf("end = %+v", end)
	}
	if _, ok := h.readFile("build/x.o"); !ok {
		t.Fatal("the denied command ran")
	}
	denied := ofType[presenters.PermissionDeniedPayload](h.rec.all())
	if len(denied) != 1 || denied[0].OptionID != OptionRejectOnce || denied[0].DecidedBy != presenters.DecidedByUser {
		t.Fatalf("denied = %+v", denied)
	}
	tool := ofType[presenters.ToolEndPayload](h.rec.all())[0].Tool
	if tool.Status != presenters.ToolFailed || !strings.Contains(tool.Error, "permission denied") || tool.CommandInfo == nil {
		t.Fatalf("tool = %+v", tool)
	}
	results := toolMessages(h.llm.requestsSoFar()[1].body)
	if len(results) != 1 || !strings.Contains(results[0].Content.(string), "did not allow") {
		t.Fatalf("denial sent to the model = %+v", results)
	}
	if msgs := h.messages(info.SessionID); msgs[1].Blocks[len(msgs[1].Blocks)-1].Text != "OK, I will not delete it." {
		t.Fatalf("reply = %+v", msgs[1].Blocks)
	}
}

// TestModePolicy runs one tool call of each kind under each mode and checks whether it
// was asked for.
func TestModePolicy(t *testing.T) {
	tools := []struct {
		name, call, args string
	}{
		{"read", "read_file", `{"path":"f.txt"}`},
		{"write", "write_file", `{"path":"g.txt","content":"x"}`},
		{"low command", "run_command", `{"command":"ls"}`},
		{"high command", "run_command", `{"command":"rm -rf build"}`},
	}
	want := map[string][4]bool{ // asked? per tool above
		ModeStrict:     {true, true, true, true},
		ModeBalanced:   {false, true, true, true},
		ModePermissive: {false, false, false, true},
	}
	h := newHarness(t)
	h.writeFile("f.txt", "data")
	for _, mode := range []string{ModeStrict, ModeBalanced, ModePermissive} {
		for i, tool := range tools {
			info := h.createSession(mode)
			h.llm.script(toolReply("call_"+mode+fmt.Sprint(i), tool.call, tool.args), textReply("ok"))
			res := h.send(info.SessionID, "go")
			var asked bool
			ev := h.rec.waitFor(t, "permission or end", func(ev presenters.Event) bool {
				if ev.SessionID != info.SessionID {
					return false
				}
				return isPermissionRequired(ev) || isEnd(res.MessageID)(ev)
			})
			if p, ok := ev.Payload.(presenters.PermissionRequiredPayload); ok {
				asked = true
				h.respond(info.SessionID, p.Request.RequestID, OptionRejectOnce)
				h.waitEnd(res.MessageID)
			}
			if asked != want[mode][i] {
				t.Errorf("mode %s, %s: asked=%v, want %v", mode, tool.name, asked, want[mode][i])
			}
		}
	}
}

func TestAllowAlwaysHoldsForSameToolAndSignature(t *testing.T) {
	h := newHarness(t)
	info := h.createSession(ModeBalanced)
	h.llm.script(
		toolReply("call_1", "run_command", `{"command":"echo one"}`),
		toolReply("call_2", "run_command", `{"command":"echo two"}`),
		toolReply("call_3", "run_command", `{"command":"ls"}`),
		textReply("done"),
	)
	res := h.send(info.SessionID, "run things")
	first := h.rec.waitFor(t, "first request", isPermissionRequired).Payload.(presenters.PermissionRequiredPayload).Request
	if first.ToolID != "call_1" {
		t.Fatalf("first request for %s", first.ToolID)
	}
	h.respond(info.SessionID, first.RequestID, OptionAllowAlways)
	second := h.rec.waitFor(t, "request for ls", func(ev presenters.Event) bool {
		p, ok := ev.Payload.(presenters.PermissionRequiredPayload)
		return ok && p.Request.ToolID != "call_1"
	}).Payload.(presenters.PermissionRequiredPayload).Request
	if second.ToolID != "call_3" {
		t.Fatalf("echo two was asked again (request for %s)", second.ToolID)
	}
	h.respond(info.SessionID, second.RequestID, OptionAllowOnce)
	h.waitEnd(res.MessageID)
	ends := ofType[presenters.ToolEndPayload](h.rec.all())
	if len(ends) != 3 {
		t.Fatalf("tool ends = %+v", ends)
	}
	for _, e := range ends {
		if e.Tool.Status != presenters.ToolCompleted {
			t.Fatalf("tool %s = %s (%s)", e.Tool.ToolID, e.Tool.Status, e.Tool.Error)
		}
	}
	term := ends[1].Tool.Content[0].Terminal
	if term == nil || term.ExitCode == nil || *term.ExitCode != 0 || !strings.Contains(term.Output, "two") {
		t.Fatalf("terminal = %+v", term)
	}
}

func TestCancelMidStreamKeepsPartialReply(t *testing.T) {
	h := newHarness(t)
	info := h.createSession("")
	h.llm.script(fakeReply{events: []string{textEvent("partial "), textEvent("answer")}, hold: true})
	res := h.send(info.SessionID, "long question")
	h.rec.waitFor(t, "second delta", func(ev presenters.Event) bool {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		return ok && d.Text == "answer"
	})
	if id, err := h.p.CancelMessage(context.Background(), info.SessionID, ""); err != nil || id != res.MessageID {
		t.Fatalf("cancel of whatever runs: %q, %v; want %s", id, err, res.MessageID)
	}
	// CancelMessage returns after the turn ended.
	end := h.waitEnd(res.MessageID)
	if end.StopReason != presenters.StopCancelled {
		t.Fatalf("end = %+v", end)
	}
	select {
	case <-h.llm.gone:
	case <-time.After(waitLimit):
		t.Fatal("the provider stream was not closed")
	}
	msgs := h.messages(info.SessionID)
	if msgs[1].Status != presenters.MessageCancelled || msgs[1].StopReason != presenters.StopCancelled || msgs[1].Blocks[0].Text != "partial answer" {
		t.Fatalf("stored reply = %+v", msgs[1])
	}
	if got, _ := h.p.GetSession(context.Background(), info.SessionID); got.Status != presenters.SessionIdle {
		t.Fatalf("status after cancel = %s", got.Status)
	}
	// The session takes the next message.
	h.llm.script(textReply("fine"))
	if _, end := h.turn(info.SessionID, "again"); end.StopReason != presenters.StopEndTurn {
		t.Fatalf("next turn = %+v", end)
	}
	// Cancelling whatever runs when nothing does is not an error; naming a turn that
	// does not run is.
	if id, err := h.p.CancelMessage(context.Background(), info.SessionID, ""); err != nil || id != "" {
		t.Fatalf("cancel with nothing running: %q, %v", id, err)
	}
	if _, err := h.p.CancelMessage(context.Background(), info.SessionID, res.MessageID); !errors.Is(err, presenters.ErrMessageNotRunning) {
		t.Fatalf("cancel of an ended turn: %v, want ErrMessageNotRunning", err)
	}
}

// CancelMessage naming another message than the running turn's is refused and leaves
// the turn running.
func TestCancelOfAnotherMessageIsRefused(t *testing.T) {
	h := newHarness(t)
	info := h.createSession("")
	h.llm.script(fakeReply{events: []string{textEvent("partial")}, hold: true})
	res := h.send(info.SessionID, "long question")
	h.rec.waitFor(t, "the delta", func(ev presenters.Event) bool {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		return ok && d.Text == "partial"
	})
	_, err := h.p.CancelMessage(context.Background(), info.SessionID, "another")
	if !errors.Is(err, presenters.ErrMessageNotRunning) || !strings.Contains(err.Error(), res.MessageID) {
		t.Fatalf("cancel of another message: %v, want ErrMessageNotRunning naming %s", err, res.MessageID)
	}
	if got, _ := h.p.GetSession(context.Background(), info.SessionID); got.MessageInFlight != res.MessageID {
		t.Fatalf("the turn stopped: %+v", got)
	}
	if _, err := h.p.CancelMessage(context.Background(), info.SessionID, res.MessageID); err != nil {
		t.Fatal(err)
	}
}

// Client-chosen ids name the turn's messages; an id taken, in this session or another,
// is refused, and so is one id for both.
func TestClientChosenMessageIDs(t *testing.T) {
	h := newHarness(t)
	info := h.createSession("")
	h.llm.script(textReply("one"))
	res, err := h.p.SendMessage(context.Background(), info.SessionID, presenters.TextContent("hi"),
		presenters.SendOptions{MessageID: "reply-1", UserMessageID: "ask-1"})
	if err != nil || res.MessageID != "reply-1" || res.UserMessageID != "ask-1" {
		t.Fatalf("SendMessage = %+v, %v; want the chosen ids", res, err)
	}
	h.waitEnd(res.MessageID)
	if msgs := h.messages(info.SessionID); len(msgs) != 2 || msgs[0].ID != "ask-1" || msgs[1].ID != "reply-1" {
		t.Fatalf("stored messages %+v", msgs)
	}
	other := h.createSession("")
	for _, c := range []struct {
		session string
		opts    presenters.SendOptions
	}{{info.SessionID, presenters.SendOptions{MessageID: "ask-1"}}, {info.SessionID, presenters.SendOptions{UserMessageID: "reply-1"}},
		{other.SessionID, presenters.SendOptions{MessageID: "reply-1"}}} {
		if _, err := h.p.SendMessage(context.Background(), c.session, presenters.TextContent("again"), c.opts); !errors.Is(err, presenters.ErrMessageIDInUse) {
			t.Errorf("SendMessage to %s with %+v: %v, want ErrMessageIDInUse", c.session, c.opts, err)
		}
	}
	if _, err := h.p.SendMessage(context.Background(), info.SessionID, presenters.TextContent("again"),
		presenters.SendOptions{MessageID: "x", UserMessageID: "x"}); !errors.Is(err, presenters.ErrInvalidArgument) {
		t.Errorf("one id for both: %v, want ErrInvalidArgument", err)
	}
}

func TestCancelWhileWaitingForPermission(t *testing.T) {
	h := newHarness(t)
	info := h.createSession(ModeStrict)
	h.llm.script(toolReply("call_x", "read_file", `{"path":"nope.txt"}`))
	res := h.send(info.SessionID, "read")
	h.rec.waitFor(t, "permission required", isPermissionRequired)
	if _, err := h.p.CancelMessage(context.Background(), info.SessionID, res.MessageID); err != nil {
		t.Fatal(err)
	}
	denied := ofType[presenters.PermissionDeniedPayload](h.rec.all())
	if len(denied) != 1 || denied[0].DecidedBy != presenters.DecidedByCancelled {
		t.Fatalf("denied = %+v", denied)
	}
	ends := ofType[presenters.MessageEndPayload](h.rec.all())
	if len(ends) != 2 || ends[0].Role != presenters.RoleUser || ends[1].StopReason != presenters.StopCancelled {
		t.Fatalf("ends = %+v", ends)
	}
	tool := ofType[presenters.ToolEndPayload](h.rec.all())[0].Tool
	if tool.Status != presenters.ToolCancelled {
		t.Fatalf("tool = %+v", tool)
	}
}

func TestCancelStopsRunningCommand(t *testing.T) {
	h := newHarness(t)
	info := h.createSession(ModePermissive)
	h.llm.script(toolReply("call_s", "run_command", `{"command":"echo started; sleep 60"}`))
	res := h.send(info.SessionID, "wait a minute")
	h.rec.waitFor(t, "terminal running", func(ev presenters.Event) bool {
		p, ok := ev.Payload.(presenters.ToolRunningPayload)
		return ok && len(p.Tool.Content) == 1 && p.Tool.Content[0].Terminal != nil
	})
	if _, err := h.p.CancelMessage(context.Background(), info.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	end := h.waitEnd(res.MessageID)
	if end.StopReason != presenters.StopCancelled {
		t.Fatalf("end = %+v", end)
	}
	tool := ofType[presenters.ToolEndPayload](h.rec.all())[0].Tool
	if tool.Status != presenters.ToolCancelled || tool.Content[0].Terminal == nil || tool.Content[0].Terminal.Signal != "SIGKILL" {
		t.Fatalf("tool = %+v / %+v", tool, tool.Content)
	}
}

func TestCommandTimeoutKillsIt(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.cfg.CommandTimeout = 200 * time.Millisecond })
	info := h.createSession(ModePermissive)
	h.llm.script(toolReply("call_t", "run_command", `{"command":"sleep 30"}`), textReply("it hung"))
	h.turn(info.SessionID, "run")
	tool := ofType[presenters.ToolEndPayload](h.rec.all())[0].Tool
	if tool.Status != presenters.ToolFailed || !strings.Contains(tool.Error, "timed out") {
		t.Fatalf("tool = %+v", tool)
	}
	if out := toolMessages(h.llm.requestsSoFar()[1].body)[0].Content.(string); !strings.Contains(out, "did not finish") {
		t.Fatalf("model got %q", out)
	}
}

func TestProviderErrors(t *testing.T) {
	s := time.Second
	cases := []struct {
		name     string
		replies  []fakeReply
		code     string // "" = the turn succeeds
		requests int
		sleeps   []time.Duration // the waits asked for between attempts
		partial  string          // text kept in the stored reply
		message  string          // part of the error message
	}{
		{"unauthorized is not retried", []fakeReply{{status: 401, body: `{"error":{"message":"Incorrect API key provided"}}`}},
			"provider_unauthorized", 1, nil, "", "Incorrect API key"},
		{"rate limit waits as long as retry-after says", []fakeReply{{status: 429, headers: map[string]string{"Retry-After": "7"}, body: `{"error":{"message":"slow down"}}`}, textReply("ok")},
			"", 2, []time.Duration{7 * s}, "ok", ""},
		{"rate limit longer than the longest wait is reported", []fakeReply{{status: 429, headers: map[string]string{"Retry-After": "3600"}, body: `{"error":{"message":"quota"}}`}},
			"provider_rate_limited", 1, nil, "", "retry after 1h0m0s"},
		{"rate limit without retry-after backs off", []fakeReply{{status: 429, body: "busy"}, textReply("ok")},
			"", 2, []time.Duration{1 * s}, "ok", ""},
		{"5xx retried then reported", []fakeReply{{status: 502, body: "bad gateway"}, {status: 503, body: "busy"}, {status: 500, body: `{"error":{"message":"boom"}}`}},
			"provider_unavailable", 3, []time.Duration{1 * s, 2 * s}, "", "HTTP 500"},
		{"5xx then success", []fakeReply{{status: 500, body: "x"}, textReply("recovered")}, "", 2, []time.Duration{1 * s}, "recovered", ""},
		{"dropped stream after output is not retried", []fakeReply{{events: []string{textEvent("half an ")}, hangup: true}},
			"provider_unavailable", 1, nil, "half an ", "broke"},
		{"stream ended without finishing", []fakeReply{{events: []string{textEvent("cut")}, noDone: true}},
			"provider_unavailable", 1, nil, "cut", "closed the stream"},
		{"dropped stream before output is retried", []fakeReply{{hangup: true}, textReply("second try")}, "", 2, []time.Duration{1 * s}, "second try", ""},
		{"error event mid-stream", []fakeReply{{events: []string{textEvent("a"), mustJSON(map[string]any{"error": map[string]any{"message": "overloaded"}})}}},
			"agent_error", 1, nil, "a", "overloaded"},
		{"not found names base_url", []fakeReply{{status: 404, body: `{"error":{"message":"model not found"}}`}}, "provider_not_found", 1, nil, "", "base_url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			info := h.createSession("")
			h.llm.script(tc.replies...)
			res, end := h.turn(info.SessionID, "hi")
			if n := len(h.llm.requestsSoFar()); n != tc.requests {
				t.Fatalf("%d requests, want %d", n, tc.requests)
			}
			if got := h.sleeps.all(); !slices.Equal(got, tc.sleeps) {
				t.Fatalf("waited %v between attempts, want %v", got, tc.sleeps)
			}
			errs := ofType[presenters.ErrorPayload](h.rec.all())
			msgs := h.messages(info.SessionID)
			reply := msgs[1]
			text := ""
			for _, b := range reply.Blocks {
				if b.Type == presenters.BlockText {
					text += b.Text
				}
			}
			if text != tc.partial {
				t.Fatalf("stored text %q, want %q", text, tc.partial)
			}
			if tc.code == "" {
				if len(errs) != 0 || end.StopReason != presenters.StopEndTurn || reply.Status != presenters.MessageComplete {
					t.Fatalf("errors %+v, end %+v, reply %+v", errs, end, reply)
				}
				return
			}
			if len(errs) != 1 || errs[0].Code != tc.code || errs[0].MessageID != res.MessageID || !strings.Contains(errs[0].Message, tc.message) {
				t.Fatalf("errors = %+v", errs)
			}
			if end.StopReason != presenters.StopError || reply.Status != presenters.MessageError || reply.Blocks[len(reply.Blocks)-1].Error.Code != tc.code {
				t.Fatalf("end %+v, reply %+v", end, reply)
			}
			got, _ := h.p.GetSession(context.Background(), info.SessionID)
			if got.Status != presenters.SessionError || got.StatusReason == "" {
				t.Fatalf("session after error = %s %q", got.Status, got.StatusReason)
			}
			// The session recovers with the next message.
			h.llm.script(textReply("fine"))
			if _, end := h.turn(info.SessionID, "again"); end.StopReason != presenters.StopEndTurn {
				t.Fatalf("next turn = %+v", end)
			}
		})
	}
}

func TestProviderIdleTimeout(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.cfg.ProviderIdleTimeout = 100 * time.Millisecond })
	h.p.client.maxRetries = 0
	info := h.createSession("")
	h.llm.script(fakeReply{events: []string{textEvent("slow")}, hold: true})
	_, end := h.turn(info.SessionID, "hi")
	errs := ofType[presenters.ErrorPayload](h.rec.all())
	if end.StopReason != presenters.StopError || len(errs) != 1 || errs[0].Code != "provider_unavailable" {
		t.Fatalf("end %+v errors %+v", end, errs)
	}
}

func TestMaxToolRounds(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.cfg.MaxToolRounds = 2 })
	info := h.createSession(ModeBalanced)
	h.llm.script(toolReply("c1", "list_directory", `{}`), toolReply("c2", "list_directory", `{}`))
	_, end := h.turn(info.SessionID, "loop")
	if end.StopReason != presenters.StopMaxTurnRequests || len(h.llm.requestsSoFar()) != 2 {
		t.Fatalf("end %+v after %d requests", end, len(h.llm.requestsSoFar()))
	}
	blocks := h.messages(info.SessionID)[1].Blocks
	last := blocks[len(blocks)-1]
	if last.Type != presenters.BlockAction || last.Action.ActionType != "max_tool_rounds" {
		t.Fatalf("last block = %+v", last)
	}
}

func TestToolErrorsGoBackToTheModel(t *testing.T) {
	h := newHarness(t)
	info := h.createSession(ModePermissive)
	h.writeFile("x.txt", "aaa")
	h.llm.script(
		fakeReply{events: append(append(append(
			toolEvents(0, "c1", "read_file", `{"path":"../../etc/passwd"}`),
			toolEvents(1, "c2", "edit_file", `{"path":"x.txt","old_string":"a","new_string":"b"}`)...),
			toolEvents(2, "c3", "teleport", `{}`)...),
			toolEvents(3, "c4", "write_file", `{"path": oops`)...)},
		textReply("I see."),
	)
	h.turn(info.SessionID, "try")
	results := toolMessages(h.llm.requestsSoFar()[1].body)
	wants := []string{"outside the workspace", "occurs 3 times", "no tool named", "not valid JSON"}
	if len(results) != len(wants) {
		t.Fatalf("results = %+v", results)
	}
	for i, w := range wants {
		if s := results[i].Content.(string); !strings.Contains(s, w) || !strings.HasPrefix(s, "Error: ") {
			t.Errorf("result %d = %q, want it to mention %q", i, s, w)
		}
	}
	for _, e := range ofType[presenters.ToolEndPayload](h.rec.all()) {
		if e.Tool.Status != presenters.ToolFailed {
			t.Errorf("tool %s = %s", e.Tool.ToolID, e.Tool.Status)
		}
	}
	if content, _ := h.readFile("x.txt"); content != "aaa" {
		t.Fatalf("x.txt = %q", content)
	}
}

func TestRestartKeepsHistoryAndLoadSessionReplays(t *testing.T) {
	h := newHarness(t)
	h.writeFile("f.txt", "content")
	info := h.createSession(ModePermissive)
	h.llm.script(toolReply("c1", "read_file", `{"path":"f.txt"}`), textReply("It holds content."))
	h.turn(info.SessionID, "read f.txt")
	h.llm.script(textReply("Second answer."))
	h.turn(info.SessionID, "and now?")
	before := h.messages(info.SessionID)
	beforeInfo, _ := h.p.GetSession(context.Background(), info.SessionID)

	h.stop()
	h.rec = newRecorder()
	h.start()

	after := h.messages(info.SessionID)
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("history changed across restart:\n%+v\n%+v", before, after)
	}
	gotInfo, err := h.p.GetSession(context.Background(), info.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if !gotInfo.Usage.Equal(beforeInfo.Usage) || gotInfo.MessageCount != 4 || gotInfo.CurrentModeID != ModePermissive || gotInfo.Title != "read f.txt" {
		t.Fatalf("session after restart = %+v", gotInfo)
	}

	loaded, err := h.p.LoadSession(context.Background(), info.SessionID, presenters.LoadContext{})
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Status != presenters.SessionIdle || loaded.MessageCount != 4 {
		t.Fatalf("LoadSession = %+v", loaded)
	}
	if got := h.rec.summary(); got != "user_delta user_end block:tool delta end:end_turn user_delta user_end delta end:end_turn ready" {
		// user text, assistant [tool, text], user text, assistant text
		t.Fatalf("replay = %s", got)
	}
	for _, ev := range h.rec.all() { // the history is marked replay; SESSION_READY is not
		if _, ready := ev.Payload.(presenters.SessionReadyPayload); ev.Replay == ready {
			t.Errorf("%s marked replay %t", describe(ev), ev.Replay)
		}
	}
	deltas := ofType[presenters.MessageDeltaPayload](h.rec.all())
	if deltas[0].Role != presenters.RoleUser || deltas[0].Text != "read f.txt" || deltas[1].Role != presenters.RoleAssistant || deltas[3].Text != "Second answer." {
		t.Fatalf("replayed deltas = %+v", deltas)
	}
	if ready := ofType[presenters.SessionReadyPayload](h.rec.all()); ready[0].MessageCount != 4 {
		t.Fatalf("ready = %+v", ready)
	}

	h.rec = newRecorder()
	h.p.deps.Publisher = h.rec
	if _, err := h.p.LoadSession(context.Background(), info.SessionID, presenters.LoadContext{MaxHistory: 1}); err != nil {
		t.Fatal(err)
	}
	if got := h.rec.summary(); got != "delta end:end_turn ready" {
		t.Fatalf("replay of 1 = %s", got)
	}
	// The history sent to the model after the restart is the same conversation.
	h.llm.script(textReply("third"))
	h.turn(info.SessionID, "third?")
	reqs := h.llm.requestsSoFar()
	last := reqs[len(reqs)-1].body.Messages
	if len(last) != 8 || last[3].ToolCallID != "c1" || last[5].Content != "and now?" {
		t.Fatalf("request after restart = %+v", last)
	}
}

func TestInterruptedTurnIsIncompleteAfterRestart(t *testing.T) {
	h := newHarness(t)
	info := h.createSession("")
	// A turn that was cut by a crash: the user message and an in-progress reply.
	ctx := context.Background()
	err := h.store.SaveMessages(ctx,
		presenters.Message{ID: "u1", SessionID: info.SessionID, Role: presenters.RoleUser, Status: presenters.MessageComplete,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "q"}}},
		presenters.Message{ID: "a1", SessionID: info.SessionID, Role: presenters.RoleAssistant, Status: store.StatusInProgress,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "half"}}})
	if err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.rec = newRecorder()
	h.start() // runs MarkInterrupted
	msgs := h.messages(info.SessionID)
	if msgs[1].Status != presenters.MessageIncomplete || msgs[1].Blocks[0].Text != "half" {
		t.Fatalf("interrupted reply = %+v", msgs[1])
	}
	h.llm.script(textReply("whole"))
	h.turn(info.SessionID, "again")
	sent := h.llm.requestsSoFar()[0].body.Messages
	if len(sent) != 4 || sent[2].Content != "half" || sent[3].Content != "again" {
		t.Fatalf("history sent = %+v", sent)
	}
}

func TestSessionLifecycle(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.p.CreateSession(ctx, presenters.SessionConfig{Workspace: h.opened(h.workspace), ModelID: "gpt-9"}); !errors.Is(err, presenters.ErrInvalidArgument) {
		t.Fatalf("unknown model: %v", err)
	}
	if _, err := h.p.CreateSession(ctx, presenters.SessionConfig{Workspace: h.opened(h.workspace), ModeID: "yolo"}); !errors.Is(err, presenters.ErrInvalidArgument) {
		t.Fatalf("unknown mode: %v", err)
	}
	info, err := h.p.CreateSession(ctx, presenters.SessionConfig{Workspace: h.opened(h.workspace), ModelID: "fake-large", Title: "named"})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.AvailableModes) != 3 || len(info.AvailableModels) != 2 || !info.Capabilities.SupportsLoad || info.Title != "named" {
		t.Fatalf("info = %+v", info)
	}
	if _, err := h.p.SetModel(ctx, info.SessionID, "nope"); !errors.Is(err, presenters.ErrInvalidArgument) {
		t.Fatalf("SetModel(nope): %v", err)
	}
	if _, err := h.p.SetMode(ctx, info.SessionID, "nope"); !errors.Is(err, presenters.ErrInvalidArgument) {
		t.Fatalf("SetMode(nope): %v", err)
	}
	got, err := h.p.SetModel(ctx, info.SessionID, "fake-small")
	if err != nil || got.CurrentModelID != "fake-small" {
		t.Fatalf("SetModel = %+v, %v", got, err)
	}
	got, err = h.p.SetMode(ctx, info.SessionID, ModeStrict)
	if err != nil || got.CurrentModeID != ModeStrict {
		t.Fatalf("SetMode = %+v, %v", got, err)
	}
	updates := ofType[presenters.SessionUpdatedPayload](h.rec.all())
	if len(updates) != 2 || *updates[0].Patch.CurrentModelID != "fake-small" || *updates[1].Patch.CurrentModeID != ModeStrict {
		t.Fatalf("updates = %+v", updates)
	}
	h.llm.script(textReply("x"))
	h.turn(info.SessionID, "hi")
	if m := h.llm.requestsSoFar()[0].body.Model; m != "fake-small" {
		t.Fatalf("model used = %s", m)
	}

	if err := h.p.CloseSession(ctx, info.SessionID); err != nil {
		t.Fatal(err)
	}
	if err := h.p.CloseSession(ctx, info.SessionID); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if n := len(ofType[presenters.SessionClosedPayload](h.rec.all())); n != 1 {
		t.Fatalf("%d SESSION_CLOSED events", n)
	}
	closed, err := h.p.GetSession(ctx, info.SessionID)
	if err != nil || closed.Status != presenters.SessionClosed {
		t.Fatalf("closed session = %+v, %v", closed, err)
	}
	if _, err := h.p.SendMessage(ctx, info.SessionID, presenters.TextContent("x"), presenters.SendOptions{}); !errors.Is(err, presenters.ErrFailedPrecondition) {
		t.Fatalf("SendMessage on closed: %v", err)
	}
	if msgs := h.messages(info.SessionID); len(msgs) != 2 {
		t.Fatalf("history of closed session: %d messages", len(msgs))
	}
	reopened, err := h.p.LoadSession(ctx, info.SessionID, presenters.LoadContext{})
	if err != nil || reopened.Status != presenters.SessionIdle {
		t.Fatalf("reopen = %+v, %v", reopened, err)
	}
	for _, call := range []func() error{
		func() error { _, err := h.p.GetSession(ctx, "missing"); return err },
		func() error { _, err := h.p.GetMessages(ctx, "missing", presenters.MessageQuery{}); return err },
		func() error { _, err := h.p.LoadSession(ctx, "missing", presenters.LoadContext{}); return err },
		func() error { return h.p.CloseSession(ctx, "missing") },
		func() error { _, err := h.p.CancelMessage(ctx, "missing", ""); return err },
		func() error {
			_, err := h.p.SendMessage(ctx, "missing", presenters.TextContent("x"), presenters.SendOptions{})
			return err
		},
		func() error {
			return h.p.RespondPermission(ctx, info.SessionID, presenters.PermissionResponse{RequestID: "r", OptionID: OptionAllowOnce})
		},
	} {
		if err := call(); !errors.Is(err, presenters.ErrNotFound) {
			t.Errorf("unknown id: %v, want not found", err)
		}
	}
	if _, err := h.p.SendMessage(ctx, info.SessionID, presenters.MessageContent{}, presenters.SendOptions{}); !errors.Is(err, presenters.ErrInvalidArgument) {
		t.Fatalf("empty message: %v", err)
	}
}

func TestNeedsConfiguration(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	unconfigured, err := New(Config{ID: "deepchat.default"}, Deps{Publisher: h.rec, Roots: h.roots, Store: h.store})
	if err != nil {
		t.Fatal(err)
	}
	defer unconfigured.Close(ctx)
	d := unconfigured.Describe(ctx)
	if d.Status != presenters.AgentNeedsConfiguration {
		t.Fatalf("status = %s", d.Status)
	}
	if !strings.HasPrefix(d.StatusReason, "deepchat.default has no usable LLM provider; missing settings: provider, base_url, models. ") {
		t.Errorf("reason %q does not list exactly the missing settings", d.StatusReason)
	}
	info, err := unconfigured.CreateSession(ctx, presenters.SessionConfig{Workspace: h.opened(h.workspace)})
	if err != nil {
		t.Fatalf("CreateSession without provider: %v", err)
	}
	if _, err := unconfigured.GetMessages(ctx, info.SessionID, presenters.MessageQuery{}); err != nil {
		t.Fatal(err)
	}
	_, err = unconfigured.SendMessage(ctx, info.SessionID, presenters.TextContent("hi"), presenters.SendOptions{})
	if !errors.Is(err, presenters.ErrFailedPrecondition) || !strings.Contains(err.Error(), "provider") {
		t.Fatalf("SendMessage without provider: %v", err)
	}

	// A hosted provider without its key.
	t.Setenv("DEEPCHAT_MISSING_KEY", "")
	openai, err := New(Config{ID: "deepchat.openai.gpt", Provider: "openai", APIKeyEnv: "DEEPCHAT_MISSING_KEY", Models: []string{"gpt-4o-mini"}},
		Deps{Publisher: h.rec, Roots: h.roots, Store: h.store})
	if err != nil {
		t.Fatal(err)
	}
	defer openai.Close(ctx)
	if d := openai.Describe(ctx); d.Status != presenters.AgentNeedsConfiguration || !strings.Contains(d.StatusReason, "DEEPCHAT_MISSING_KEY") {
		t.Fatalf("missing key: %+v", d)
	}
	info, _ = openai.CreateSession(ctx, presenters.SessionConfig{Workspace: h.opened(h.workspace)})
	if _, err := openai.SendMessage(ctx, info.SessionID, presenters.TextContent("hi"), presenters.SendOptions{}); !errors.Is(err, presenters.ErrFailedPrecondition) {
		t.Fatalf("SendMessage without key: %v", err)
	}
	nokey, err := New(Config{ID: "deepchat.openai.nokey", Provider: "openai", Models: []string{"m"}}, Deps{Publisher: h.rec, Roots: h.roots, Store: h.store})
	if err != nil {
		t.Fatal(err)
	}
	defer nokey.Close(ctx)
	if d := nokey.Describe(ctx); !strings.Contains(d.StatusReason, "missing settings: api_key_env. ") {
		t.Fatalf("openai without api_key_env: %+v", d)
	}
	// A local server needs no key.
	local, err := New(Config{ID: "deepchat.ollama.llama", Provider: "ollama", Models: []string{"llama3.2"}}, Deps{Publisher: h.rec, Roots: h.roots, Store: h.store})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close(ctx)
	if d := local.Describe(ctx); d.Status != presenters.AgentReady {
		t.Fatalf("ollama: %+v", d)
	}
	if _, err := New(Config{ID: "deepchat.custom.x", Provider: "custom", Models: []string{"m"}}, Deps{Publisher: h.rec, Roots: h.roots, Store: h.store}); err == nil {
		t.Fatal("an unknown provider without base_url must be refused")
	}
	if _, err := New(Config{ID: "acp.x.y"}, Deps{Publisher: h.rec, Roots: h.roots, Store: h.store}); err == nil {
		t.Fatal("a non-deepchat id must be refused")
	}
}

func TestAttachmentsAreStoredAndSent(t *testing.T) {
	h := newHarness(t)
	h.writeFile("doc.md", "# Title\n")
	h.writeFile("pic.png", "\x89PNG fake")
	info := h.createSession("")
	h.llm.script(textReply("seen"))
	// The parts interleaved: stored and sent to the model in this order.
	res, err := h.p.SendMessage(context.Background(), info.SessionID, presenters.MessageContent{Parts: []presenters.ContentPart{
		{Text: "look"},
		{Image: &presenters.Image{Kind: presenters.ImageFile, Data: "pic.png"}},
		{Text: "then read"},
		{File: &presenters.File{Path: "doc.md"}},
		{Image: &presenters.Image{Kind: presenters.ImageURL, Data: "https://example.com/a.jpg"}},
	}}, presenters.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.waitEnd(res.MessageID)
	user := h.messages(info.SessionID)[0]
	if len(user.Blocks) != 5 || user.Blocks[1].Image.MimeType != "image/png" || user.Blocks[1].Image.Base64 == "" ||
		user.Blocks[2].Text != "then read" || user.Blocks[3].Resource.Text != "# Title\n" || user.Blocks[4].Image.URL != "https://example.com/a.jpg" {
		t.Fatalf("user blocks = %+v", user.Blocks)
	}
	parts, ok := h.llm.requestsSoFar()[0].body.Messages[1].Content.([]any)
	if !ok || len(parts) != 5 {
		t.Fatalf("user content sent = %#v", h.llm.requestsSoFar()[0].body.Messages[1].Content)
	}
	var types []string
	for _, p := range parts {
		types = append(types, p.(map[string]any)["type"].(string))
	}
	if want := []string{"text", "image_url", "text", "text", "image_url"}; !slices.Equal(types, want) {
		t.Fatalf("user content part types %v, want %v", types, want)
	}
	img := parts[1].(map[string]any)["image_url"].(map[string]any)["url"].(string)
	if !strings.HasPrefix(img, "data:image/png;base64,") || parts[2].(map[string]any)["text"] != "then read" {
		t.Fatalf("parts = %v", parts)
	}
	_, err = h.p.SendMessage(context.Background(), info.SessionID, presenters.MessageContent{Parts: []presenters.ContentPart{
		{Text: "see"}, {File: &presenters.File{Path: "/etc/passwd"}}}}, presenters.SendOptions{})
	if !errors.Is(err, presenters.ErrInvalidArgument) || !strings.Contains(err.Error(), "content.parts[1]") {
		t.Fatalf("file outside the workspace: %v, want ErrInvalidArgument naming content.parts[1]", err)
	}
}

// TestLongReplyIsCoalesced streams a long reply and counts the SQLite commits of the
// turn (a commit hook on every connection of the store's database): the commit that
// starts the turn, the checkpoints, and the two that end it (the reply, then the
// session's row). The checkpoint clock is the test's; the transcript writer may join
// checkpoints that wait for it, so the checkpoints are at most one per threshold.
func TestLongReplyIsCoalesced(t *testing.T) {
	cases := []struct {
		name   string
		chunks int
		size   int                     // bytes per chunk
		clock  func() func() time.Time // a new clock for the presenter
		most   int64                   // commits of the turn
	}{
		// A stopped clock: only the byte threshold checkpoints, once per 512 KiB of the
		// 2,000,000 bytes.
		{"by size", 10000, 200, stoppedClock, 3 + 2000000/checkpointBytes},
		// A clock that moves a whole interval at every reading: every chunk asks for one.
		{"by time", 50, 10, movingClock, 3 + 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, countCommits)
			h.p.now = tc.clock()
			info := h.createSession("")
			chunks := make([]string, tc.chunks)
			for i := range chunks {
				chunks[i] = fmt.Sprintf("%-*d", tc.size, i)
			}
			h.llm.script(textReply(chunks...))
			before := commits.Load()
			_, end := h.turn(info.SessionID, "write a lot")
			used := commits.Load() - before
			if end.StopReason != presenters.StopEndTurn {
				t.Fatalf("end = %+v", end)
			}
			if used > tc.most {
				t.Fatalf("%d commits for %d chunks of %d bytes, want at most %d", used, tc.chunks, tc.size, tc.most)
			}
			reply := h.messages(info.SessionID)[1]
			if len(reply.Blocks) != 1 || reply.Blocks[0].Text != strings.Join(chunks, "") || reply.Status != presenters.MessageComplete {
				t.Fatalf("stored reply has %d blocks, status %s", len(reply.Blocks), reply.Status)
			}
		})
	}
}

// stoppedClock is a clock that never moves: only the byte threshold checkpoints.
func stoppedClock() func() time.Time {
	stopped := time.Now()
	return func() time.Time { return stopped }
}

// movingClock is a clock that moves a whole checkpoint interval at every reading.
func movingClock() func() time.Time {
	var mu sync.Mutex
	now := time.Now()
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(checkpointInterval)
		return now
	}
}

// While a reply streams, its checkpoints reach the store, in progress: once its unsaved
// text passes checkpointBytes, and once checkpointInterval passed.
func TestCheckpointsReachTheStoreWhileTheReplyStreams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		clock  func() func() time.Time
		chunks []string
		stored int // bytes of the reply the store holds at least
	}{
		{"by size", stoppedClock, []string{strings.Repeat("a", checkpointBytes), "tail"}, checkpointBytes},
		{"by time", movingClock, []string{"one", "two"}, len("one")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.p.now = tc.clock()
			info := h.createSession("")
			var evs []string
			for _, c := range tc.chunks {
				evs = append(evs, textEvent(c))
			}
			h.llm.script(fakeReply{events: evs, hold: true})
			res := h.send(info.SessionID, "stream")
			for deadline := time.Now().Add(waitLimit); ; time.Sleep(10 * time.Millisecond) {
				msgs, err := h.store.Messages(context.Background(), info.SessionID, presenters.MessageQuery{MessageID: res.MessageID})
				if err != nil {
					t.Fatal(err)
				}
				if len(msgs) == 1 && len(msgs[0].Blocks) == 1 && len(msgs[0].Blocks[0].Text) >= tc.stored {
					if msgs[0].Status != presenters.MessageIncomplete { // in progress, as readers see it
						t.Fatalf("a checkpoint stored status %s", msgs[0].Status)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the store does not hold %d bytes of the streaming reply: %+v", tc.stored, msgs)
				}
			}
			if _, err := h.p.CancelMessage(context.Background(), info.SessionID, res.MessageID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// While the database refuses writes (an outage), the finished reply's write is tried
// again and its MESSAGE_END waits for it; once writes work again the reply is stored
// whole and complete, then the turn ends.
func TestReplyIsStoredBeforeItsEndThroughAnOutage(t *testing.T) {
	h := newHarness(t)
	info := h.createSession("")
	if err := h.db.Exec(`CREATE TRIGGER refuse_message_updates BEFORE UPDATE ON messages
		BEGIN SELECT RAISE(ABORT, 'the database is away'); END`).Error; err != nil {
		t.Fatal(err)
	}
	h.llm.script(textReply("the ", "whole ", "reply"))
	res := h.send(info.SessionID, "hi")
	for deadline := time.Now().Add(waitLimit); strings.Count(h.logs.String(), "trying again") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the reply's write was not tried again; log:\n%s", h.logs.String())
		}
	}
	if slices.ContainsFunc(h.rec.all(), isEnd(res.MessageID)) {
		t.Fatal("MESSAGE_END was sent while the reply could not be stored")
	}
	if got, _ := h.p.GetSession(context.Background(), info.SessionID); got.MessageInFlight != res.MessageID {
		t.Fatalf("the session is not busy with the reply while it is stored: %+v", got)
	}
	if err := h.db.Exec(`DROP TRIGGER refuse_message_updates`).Error; err != nil {
		t.Fatal(err)
	}
	if end := h.waitEnd(res.MessageID); end.StopReason != presenters.StopEndTurn {
		t.Fatalf("end = %+v", end)
	}
	reply := h.messages(info.SessionID)[1]
	if reply.Status != presenters.MessageComplete || len(reply.Blocks) != 1 || reply.Blocks[0].Text != "the whole reply" {
		t.Fatalf("stored reply = %+v", reply)
	}
	if errs := ofType[presenters.ErrorPayload](h.rec.all()); len(errs) != 0 {
		t.Fatalf("errors = %+v", errs)
	}
}

func TestSetModelAppliesFromTheNextProviderCall(t *testing.T) {
	h := newHarness(t)
	info := h.createSession(ModeStrict)
	h.llm.script(toolReply("c1", "list_directory", `{}`), textReply("done"))
	res := h.send(info.SessionID, "list")
	req := h.rec.waitFor(t, "permission required", isPermissionRequired).Payload.(presenters.PermissionRequiredPayload).Request
	if _, err := h.p.SetModel(context.Background(), info.SessionID, "fake-large"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.p.SetMode(context.Background(), info.SessionID, ModePermissive); err != nil {
		t.Fatal(err)
	}
	h.respond(info.SessionID, req.RequestID, OptionAllowOnce)
	h.waitEnd(res.MessageID)
	reqs := h.llm.requestsSoFar()
	if reqs[0].body.Model != "fake-small" || reqs[1].body.Model != "fake-large" {
		t.Fatalf("models used: %s, %s", reqs[0].body.Model, reqs[1].body.Model)
	}
}

func TestUnansweredPermissionTimesOutAsDenied(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.cfg.PermissionTimeout = 50 * time.Millisecond })
	info := h.createSession(ModeBalanced)
	h.llm.script(toolReply("c1", "write_file", `{"path":"x.txt","content":"x"}`), textReply("skipped"))
	_, end := h.turn(info.SessionID, "write")
	denied := ofType[presenters.PermissionDeniedPayload](h.rec.all())
	if len(denied) != 1 || denied[0].DecidedBy != presenters.DecidedByCancelled || !strings.Contains(denied[0].Reason, "no answer within") {
		t.Fatalf("denied = %+v", denied)
	}
	if end.StopReason != presenters.StopEndTurn {
		t.Fatalf("end = %+v", end)
	}
	if _, ok := h.readFile("x.txt"); ok {
		t.Fatal("the file was written without an answer")
	}
}
