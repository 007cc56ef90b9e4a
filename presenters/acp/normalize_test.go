package acp

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/risk"
)

// update decodes a session/update's "update" object exactly as the SDK does.
func update(t *testing.T, js string) sdk.SessionUpdate {
	t.Helper()
	var n sdk.SessionNotification
	if err := json.Unmarshal([]byte(`{"sessionId":"s","update":`+js+`}`), &n); err != nil {
		t.Fatalf("decode %s: %v", js, err)
	}
	return n.Update
}

// summary renders a payload compactly for comparison.
func summary(p presenters.Payload) string {
	switch v := p.(type) {
	case presenters.MessageDeltaPayload:
		return fmt.Sprintf("DELTA %s %s %q", v.Role, v.MessageID, v.Text)
	case presenters.MessageBlockPayload:
		b := v.Block
		switch b.Type {
		case presenters.BlockText, presenters.BlockReasoning:
			return fmt.Sprintf("BLOCK %s %s %s %q", v.Role, v.MessageID, b.Type, b.Text)
		case presenters.BlockPlan:
			var parts []string
			for _, e := range b.Plan.Entries {
				parts = append(parts, e.Content+"/"+e.Status+"/"+e.Priority)
			}
			return fmt.Sprintf("BLOCK %s plan [%s]", v.MessageID, strings.Join(parts, " "))
		case presenters.BlockImage:
			return fmt.Sprintf("BLOCK %s image %s url=%q b64=%q", v.MessageID, b.Image.MimeType, b.Image.URL, b.Image.Base64)
		case presenters.BlockResource:
			return fmt.Sprintf("BLOCK %s resource %s name=%q text=%q", v.MessageID, b.Resource.URI, b.Resource.Name, b.Resource.Text)
		}
		return fmt.Sprintf("BLOCK %s %s", v.MessageID, b.Type)
	case presenters.MessageEndPayload:
		return fmt.Sprintf("END %s %s %s", v.Role, v.MessageID, v.StopReason)
	case presenters.ToolStartPayload:
		return fmt.Sprintf("TOOL_START %s %s %s %q", v.Tool.ToolID, v.Tool.Kind, v.Tool.Status, v.Tool.Title)
	case presenters.ToolRunningPayload:
		return fmt.Sprintf("TOOL_RUNNING %s %s %s %q", v.Tool.ToolID, v.Tool.Kind, v.Tool.Status, v.Tool.Title)
	case presenters.ToolEndPayload:
		return fmt.Sprintf("TOOL_END %s %s %s %q", v.Tool.ToolID, v.Tool.Kind, v.Tool.Status, v.Tool.Title)
	}
	return fmt.Sprintf("%T", p)
}

func newTestNormalizer(t *testing.T) *normalizer {
	ids := 0
	return &normalizer{
		log: discardLog(), sessionID: "s", workspace: "/ws", classifier: risk.NewClassifier(nil),
		newID: func() string { ids++; return fmt.Sprintf("r%d", ids) },
	}
}

func TestNormalizerTurnUpdates(t *testing.T) {
	tests := []struct {
		name    string
		updates []string
		want    []string
	}{
		{"text chunks are deltas; empty ones are dropped",
			[]string{`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""}}`,
				`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"}}`,
				`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"lo"}}`},
			[]string{`DELTA assistant a "Hel"`, `DELTA assistant a "lo"`}},
		{"thoughts are reasoning blocks",
			[]string{`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}`},
			[]string{`BLOCK assistant a reasoning "hmm"`}},
		{"non-text content is a block",
			[]string{`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","mimeType":"image/png","data":"AAAA"}}`,
				`{"sessionUpdate":"agent_message_chunk","content":{"type":"resource_link","name":"a.go","uri":"file:///ws/a.go"}}`,
				`{"sessionUpdate":"agent_message_chunk","content":{"type":"resource","resource":{"uri":"mem://x","text":"inline"}}}`,
				`{"sessionUpdate":"agent_message_chunk","content":{"type":"audio","mimeType":"audio/wav","data":"AAAA"}}`},
			[]string{`BLOCK a image image/png url="" b64="AAAA"`, `BLOCK a resource file:///ws/a.go name="a.go" text=""`,
				`BLOCK a resource mem://x name="" text="inline"`}},
		{"a user chunk during a turn is an echo of the stored, ended user message: dropped",
			[]string{`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"echo"}}`},
			nil},
		{"tool call lifecycle",
			[]string{`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read a.go","kind":"read","status":"pending"}`,
				`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"in_progress"}`,
				`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","rawOutput":"ok"}`},
			[]string{`TOOL_START t1 read pending "Read a.go"`, `TOOL_RUNNING t1 read in_progress "Read a.go"`, `TOOL_END t1 read completed "Read a.go"`}},
		{"a repeated tool_call is an update",
			[]string{`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Edit","kind":"edit"}`,
				`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Edit a.go","kind":"edit","locations":[{"path":"/ws/a.go"}]}`},
			[]string{`TOOL_START t1 edit pending "Edit"`, `TOOL_RUNNING t1 edit pending "Edit a.go"`}},
		{"an update before its tool_call starts it",
			[]string{`{"sessionUpdate":"tool_call_update","toolCallId":"t9","status":"in_progress","title":"Run"}`,
				`{"sessionUpdate":"tool_call","toolCallId":"t9","title":"Run ls","kind":"execute","status":"in_progress","rawInput":{"command":"ls"}}`},
			[]string{`TOOL_START t9 other in_progress "Run"`, `TOOL_RUNNING t9 execute in_progress "Run ls"`}},
		{"a tool call that arrives finished starts and ends",
			[]string{`{"sessionUpdate":"tool_call","toolCallId":"t2","title":"Search","kind":"search","status":"failed","content":[{"type":"content","content":{"type":"text","text":"no such dir"}}]}`},
			[]string{`TOOL_START t2 search failed "Search"`, `TOOL_END t2 search failed "Search"`}},
		{"plans replace each other",
			[]string{`{"sessionUpdate":"plan","entries":[{"content":"read","status":"in_progress","priority":"high"}]}`,
				`{"sessionUpdate":"plan","entries":[{"content":"read","status":"completed","priority":"high"},{"content":"write","status":"pending","priority":"low"}]}`},
			[]string{`BLOCK a plan [read/in_progress/high]`, `BLOCK a plan [read/completed/high write/pending/low]`}},
		{"unknown kinds are skipped, not misread",
			[]string{`{"sessionUpdate":"future_chunk","content":{"type":"text","text":"would decode as a user chunk"}}`,
				`{"sessionUpdate":"mystery_update","whatever":1}`},
			nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNormalizer(t)
			n.startTurn("u", "a")
			var got []string
			for _, js := range tc.updates {
				if ch := n.apply(update(t, js), func(p presenters.Payload) { got = append(got, summary(p)) }); ch != nil {
					t.Fatalf("message update %s produced a session change", js)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("events:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestNormalizerBuildsTheMessage(t *testing.T) {
	n := newTestNormalizer(t)
	n.startTurn("u", "a")
	emit := func(presenters.Payload) {}
	for _, js := range []string{
		`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"think "}}`,
		`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"more"}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Let me "}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"edit."}}`,
		`{"sessionUpdate":"plan","entries":[{"content":"edit","status":"in_progress","priority":"high"}]}`,
		`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Edit a.go","kind":"edit","status":"pending","rawInput":{"file_path":"/ws/a.go","old":"x"}}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"diff","path":"/ws/a.go","oldText":"x","newText":"y"}],"locations":[{"path":"/ws/a.go","line":3}],"rawOutput":["ok",1]}`,
		`{"sessionUpdate":"plan","entries":[{"content":"edit","status":"completed","priority":"high"}]}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Done."}}`,
	} {
		n.apply(update(t, js), emit)
	}
	msg := n.endTurn().update(presenters.MessageComplete).Message
	if msg.ID != "a" || msg.Role != presenters.RoleAssistant || msg.SessionID != "s" {
		t.Fatalf("message identity %+v", msg)
	}
	var types []string
	for _, b := range msg.Blocks {
		types = append(types, string(b.Type))
	}
	if want := []string{"reasoning", "text", "plan", "tool", "text"}; !reflect.DeepEqual(types, want) {
		t.Fatalf("blocks %v, want %v", types, want)
	}
	if msg.Blocks[0].Text != "think more" || msg.Blocks[1].Text != "Let me edit." || msg.Blocks[4].Text != "Done." {
		t.Fatalf("texts %q %q %q", msg.Blocks[0].Text, msg.Blocks[1].Text, msg.Blocks[4].Text)
	}
	if e := msg.Blocks[2].Plan.Entries; len(e) != 1 || e[0].Status != "completed" {
		t.Fatalf("plan %+v: want the latest plan in place of the first", e)
	}
	tool := msg.Blocks[3].Tool
	want := presenters.ToolCall{
		ToolID: "t1", ToolName: "edit", Title: "Edit a.go", Kind: presenters.ToolEdit, Status: presenters.ToolCompleted,
		Arguments: json.RawMessage(`{"file_path":"/ws/a.go","old":"x"}`), Result: json.RawMessage(`["ok",1]`),
		Locations: []presenters.ToolLocation{{Path: "/ws/a.go", Line: 3}},
		Content:   []presenters.ToolContent{{Diff: &presenters.DiffBlock{Path: "/ws/a.go", OldText: "x", NewText: "y"}}},
	}
	if !reflect.DeepEqual(*tool, want) {
		t.Fatalf("tool\n got %+v\nwant %+v", *tool, want)
	}
}

func TestNormalizerExecuteToolsGetTheRiskClassification(t *testing.T) {
	n := newTestNormalizer(t)
	n.startTurn("u", "a")
	var start presenters.ToolStartPayload
	n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"t","title":"Run","kind":"execute","rawInput":{"command":["bash","-lc","rm -rf /"]}}`),
		func(p presenters.Payload) { start = p.(presenters.ToolStartPayload) })
	info := start.Tool.CommandInfo
	if info == nil || info.Command != "rm -rf /" {
		t.Fatalf("command info %+v: want the unwrapped shell line", info)
	}
	if want := (*risk.Classifier)(nil).Classify("rm -rf /", "/ws"); *info != want || (info.RiskLevel != presenters.RiskCritical && info.RiskLevel != presenters.RiskHigh) {
		t.Fatalf("command info %+v, want %+v (high or critical)", *info, want)
	}
	if string(start.Tool.Arguments) != `{"command":["bash","-lc","rm -rf /"]}` {
		t.Fatalf("raw input %s", start.Tool.Arguments)
	}
}

func TestNormalizerSessionLevelUpdates(t *testing.T) {
	n := newTestNormalizer(t) // idle: no turn
	var events []presenters.Payload
	emit := func(p presenters.Payload) { events = append(events, p) }

	ch := n.apply(update(t, `{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"review","description":"Review code","input":{"hint":"path"}},{"name":"init","description":"Init"}]}`), emit)
	if ch == nil || ch.commands == nil || !reflect.DeepEqual(*ch.commands, []presenters.Command{{Name: "review", Description: "Review code", InputHint: "path"}, {Name: "init", Description: "Init"}}) {
		t.Fatalf("commands change %+v", ch)
	}
	if ch := n.apply(update(t, `{"sessionUpdate":"current_mode_update","currentModeId":"plan"}`), emit); ch == nil || deref(ch.modeID) != "plan" {
		t.Fatalf("mode change %+v", ch)
	}
	ch = n.apply(update(t, `{"sessionUpdate":"config_option_update","configOptions":[{"type":"select","id":"model","name":"Model","category":"model","currentValue":"b","options":[{"value":"a","name":"A"},{"value":"b","name":"B"}]}]}`), emit)
	if ch == nil || ch.configOptions == nil || len(*ch.configOptions) != 1 || (*ch.configOptions)[0].Select.CurrentValue != "b" {
		t.Fatalf("config change %+v", ch)
	}
	ch = n.apply(update(t, `{"sessionUpdate":"session_info_update","title":"Fix the bug","updatedAt":"2026-01-02T03:04:05Z"}`), emit)
	if ch == nil || deref(ch.title) != "Fix the bug" || ch.updatedAt == nil || ch.updatedAt.Year() != 2026 {
		t.Fatalf("info change %+v", ch)
	}
	ch = n.apply(update(t, `{"sessionUpdate":"usage_update","used":1200,"size":200000,"cost":{"amount":0.25,"currency":"USD"}}`), emit)
	if ch == nil || deref(ch.contextUsed) != 1200 || deref(ch.contextSize) != 200000 || ch.cost.Amount != 0.25 {
		t.Fatalf("usage change %+v", ch)
	}
	// Outside a turn, message content has nowhere to go.
	n.apply(update(t, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"late"}}`), emit)
	if len(events) != 0 {
		t.Fatalf("idle normalizer emitted %v", events)
	}
}

func TestNormalizerReplaysHistoryAsMessages(t *testing.T) {
	n := newTestNormalizer(t)
	n.startReplay()
	var got []string
	emit := func(p presenters.Payload) { got = append(got, summary(p)) }
	for _, js := range []string{
		`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"hi"}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hel"}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"lo"}}`,
		`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read","kind":"read","status":"completed"}`,
		`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"again"}}`,
		`{"sessionUpdate":"agent_message_chunk","messageId":"m-1","content":{"type":"text","text":"one"}}`,
		`{"sessionUpdate":"agent_message_chunk","messageId":"m-2","content":{"type":"text","text":"two"}}`,
	} {
		n.apply(update(t, js), emit)
	}
	count := n.endReplay(emit)
	want := []string{
		`DELTA user r1 "hi"`, `END user r1 `,
		`DELTA assistant r2 "hel"`, `DELTA assistant r2 "lo"`, `TOOL_START t1 read completed "Read"`, `TOOL_END t1 read completed "Read"`, `END assistant r2 end_turn`,
		`DELTA user r3 "again"`, `END user r3 `,
		`DELTA assistant r4 "one"`, `END assistant r4 end_turn`,
		`DELTA assistant r5 "two"`, `END assistant r5 end_turn`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("replay events:\n got %q\nwant %q", got, want)
	}
	if count != 5 {
		t.Fatalf("replayed %d messages, want 5", count)
	}
}

// terminalFunc is a terminalReader made of a function.
type terminalFunc func(id string) (presenters.TerminalBlock, bool)

func (f terminalFunc) terminalBlock(id string) (presenters.TerminalBlock, bool) { return f(id) }

func TestNormalizerCancelEndsUnfinishedToolsAndFollowsTerminals(t *testing.T) {
	n := newTestNormalizer(t)
	output := "one\n"
	n.terminals = terminalFunc(func(id string) (presenters.TerminalBlock, bool) {
		return presenters.TerminalBlock{TerminalID: id, Command: "make", Output: output}, id == "term-1"
	})
	n.startTurn("u", "a")
	var got []string
	emit := func(p presenters.Payload) { got = append(got, summary(p)) }
	n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"done","title":"Read","kind":"read","status":"completed"}`), emit)
	n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"run","title":"make","kind":"execute","status":"in_progress","content":[{"type":"terminal","terminalId":"term-1"}]}`), emit)
	if !n.showsLiveTerminal() {
		t.Fatal("a running tool shows a terminal: it must be followed")
	}
	if c := n.tools["run"].call.Content[0].Terminal; c == nil || c.Output != "one\n" || c.Command != "make" {
		t.Fatalf("terminal content %+v: want the terminal's current output", c)
	}
	got = nil
	if refreshShownTerminals(n, emit); len(got) != 0 {
		t.Fatalf("unchanged output emitted %v", got)
	}
	output = "one\ntwo\n"
	refreshShownTerminals(n, emit)
	if want := []string{`TOOL_RUNNING run execute in_progress "make"`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("refresh emitted %q, want %q", got, want)
	}
	if c := n.tools["run"].call.Content[0].Terminal; c.Output != "one\ntwo\n" {
		t.Fatalf("terminal output %q after refresh", c.Output)
	}
	got = nil
	n.endUnfinished(emit)
	if want := []string{`TOOL_END run execute cancelled "make"`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("cancel emitted %q, want %q", got, want)
	}
	if n.showsLiveTerminal() {
		t.Fatal("no tool runs any more")
	}
}

func TestCommandOfReadsCommonShapes(t *testing.T) {
	for in, want := range map[string]string{
		`{"command":"go test ./..."}`:            "go test ./...",
		`{"cmd":["git","status"]}`:               "git status",
		`{"command":["/bin/sh","-c","echo hi"]}`: "echo hi",
		`"ls -la"`:                               "ls -la",
		`{"path":"/x"}`:                          "",
		`{"command":["ls",1]}`:                   "",
	} {
		if got := commandOf(json.RawMessage(in)); got != want {
			t.Errorf("commandOf(%s) = %q, want %q", in, got, want)
		}
	}
}

// liveTerminalCount recounts what showsLiveTerminal answers from its counter.
func liveTerminalCount(n *normalizer) int {
	count := 0
	for _, st := range n.tools {
		if st.call.Status.Finished() {
			continue
		}
		for _, c := range st.call.Content {
			if c.Terminal != nil {
				count++
				break
			}
		}
	}
	return count
}

func TestNormalizerCountsToolsShowingALiveTerminal(t *testing.T) {
	n := newTestNormalizer(t)
	n.terminals = terminalFunc(func(id string) (presenters.TerminalBlock, bool) {
		return presenters.TerminalBlock{TerminalID: id, Output: "x"}, true
	})
	emit := func(presenters.Payload) {}
	check := func(step string, want int) {
		t.Helper()
		if got := liveTerminalCount(n); got != want || n.liveTerminals != want || n.showsLiveTerminal() != (want > 0) {
			t.Fatalf("%s: %d tools show a live terminal, counter %d, showsLiveTerminal %v; want %d",
				step, got, n.liveTerminals, n.showsLiveTerminal(), want)
		}
	}
	n.startTurn("u", "a")
	check("new turn", 0)
	n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"a","title":"make","kind":"execute","status":"in_progress","content":[{"type":"terminal","terminalId":"t1"}]}`), emit)
	check("a tool shows a terminal", 1)
	n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"a","title":"make all","kind":"execute","content":[{"type":"terminal","terminalId":"t1"}]}`), emit)
	check("the tool_call repeated", 1)
	n.apply(update(t, `{"sessionUpdate":"tool_call_update","toolCallId":"b","status":"in_progress","content":[{"type":"terminal","terminalId":"t2"}]}`), emit)
	check("a second one", 2)
	n.apply(update(t, `{"sessionUpdate":"tool_call_update","toolCallId":"b","content":[{"type":"content","content":{"type":"text","text":"done"}}]}`), emit)
	check("the second one's terminal replaced by text", 1)
	n.apply(update(t, `{"sessionUpdate":"tool_call_update","toolCallId":"a","status":"completed"}`), emit)
	check("the first one finished", 0)
	n.apply(update(t, `{"sessionUpdate":"tool_call_update","toolCallId":"b","content":[{"type":"terminal","terminalId":"t2"}]}`), emit)
	check("the second one shows a terminal again", 1)
	n.endUnfinished(emit)
	check("cancelled", 0)
	n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"c","status":"in_progress","content":[{"type":"terminal","terminalId":"t3"}]}`), emit)
	check("a third one", 1)
	n.endTurn()
	check("turn ended", 0)
	n.startReplay()
	n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"d","status":"in_progress","content":[{"type":"terminal","terminalId":"t4"}]}`), emit)
	check("a replayed tool", 1)
	n.apply(update(t, `{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"next"}}`), emit)
	check("the next replayed message", 0)
	n.endReplay(emit)
	check("replay ended", 0)
}

// A terminal may keep megabytes: TOOL_START carries its tail, TOOL_RUNNING what is new,
// the stored message and TOOL_END all of it.
func TestNormalizerLiveEventsCarryATerminalTail(t *testing.T) {
	n := newTestNormalizer(t)
	output := strings.Repeat("é", liveTerminalTail) // 2 bytes a character: cut at a boundary
	n.terminals = terminalFunc(func(id string) (presenters.TerminalBlock, bool) {
		return presenters.TerminalBlock{TerminalID: id, Output: output}, true
	})
	var events []presenters.Payload
	emit := func(p presenters.Payload) { events = append(events, p) }
	terminalOf := func(call presenters.ToolCall) *presenters.TerminalBlock {
		t.Helper()
		if len(call.Content) != 1 || call.Content[0].Terminal == nil {
			t.Fatalf("content %+v: want one terminal", call.Content)
		}
		return call.Content[0].Terminal
	}
	stored := func() *presenters.TerminalBlock {
		for _, b := range n.msg.update(presenters.MessageStatus("")).Blocks {
			if b.Tool != nil {
				return terminalOf(*b.Tool)
			}
		}
		t.Fatal("no tool block")
		return nil
	}
	n.startTurn("u", "a")
	n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"run","title":"cat","kind":"execute","status":"in_progress","content":[{"type":"terminal","terminalId":"t1"}]}`), emit)
	output += "tail"
	refreshShownTerminals(n, emit)
	if len(events) != 2 {
		t.Fatalf("events %v: want TOOL_START, TOOL_RUNNING", events)
	}
	for _, ev := range events {
		var live *presenters.TerminalBlock
		switch p := ev.(type) {
		case presenters.ToolStartPayload:
			live = terminalOf(p.Tool)
		case presenters.ToolRunningPayload:
			live = terminalOf(p.Tool)
		default:
			t.Fatalf("unexpected %T", ev)
		}
		if len(live.Output) > liveTerminalTail || !utf8.ValidString(live.Output) ||
			output[live.OutputOffset:live.OutputOffset+uint64(len(live.Output))] != live.Output {
			t.Fatalf("%T carries %d bytes at offset %d: want valid output of at most %d, at its place", ev, len(live.Output), live.OutputOffset, liveTerminalTail)
		}
	}
	if start := terminalOf(events[0].(presenters.ToolStartPayload).Tool); !start.Truncated || start.OutputOffset == 0 ||
		start.OutputOffset+uint64(len(start.Output)) != uint64(len(output)-len("tail")) {
		t.Fatalf("TOOL_START carries %d bytes from %d (truncated %v): want the tail of the %d held", len(start.Output), start.OutputOffset, start.Truncated, len(output)-len("tail"))
	}
	if got := terminalOf(events[1].(presenters.ToolRunningPayload).Tool); got.Output != "tail" {
		t.Fatalf("TOOL_RUNNING carries %q: want only the output that is new", got.Output)
	}
	if s := stored(); s.Output != output || s.Truncated {
		t.Fatalf("stored message has %d bytes (truncated %v), want all %d", len(s.Output), s.Truncated, len(output))
	}
	events = nil
	output += "end"
	n.apply(update(t, `{"sessionUpdate":"tool_call_update","toolCallId":"run","status":"completed"}`), emit)
	if len(events) != 1 {
		t.Fatalf("events %v: want TOOL_END", events)
	}
	if end := terminalOf(events[0].(presenters.ToolEndPayload).Tool); end.Output != output {
		t.Fatalf("TOOL_END carries %d bytes, want the final %d", len(end.Output), len(output))
	}
	if s := stored(); s.Output != output {
		t.Fatalf("stored message has %d bytes, want the final %d", len(s.Output), len(output))
	}
}

// Once a terminal's output is cut to its byte limit its length stays put; a change is
// still seen, and an unchanged terminal emits nothing.
func TestNormalizerSeesChangesOfATruncatedTerminal(t *testing.T) {
	n := newTestNormalizer(t)
	output := strings.Repeat("a", 100)
	n.terminals = terminalFunc(func(id string) (presenters.TerminalBlock, bool) {
		return presenters.TerminalBlock{TerminalID: id, Output: output, Truncated: true}, true
	})
	var got []string
	emit := func(p presenters.Payload) { got = append(got, summary(p)) }
	n.startTurn("u", "a")
	n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"run","title":"yes","kind":"execute","status":"in_progress","content":[{"type":"terminal","terminalId":"t1"}]}`), emit)
	got = nil
	refreshShownTerminals(n, emit)
	if len(got) != 0 {
		t.Fatalf("unchanged terminal emitted %q", got)
	}
	output = output[1:] + "b"
	refreshShownTerminals(n, emit)
	if want := []string{`TOOL_RUNNING run execute in_progress "yes"`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("rolled output emitted %q, want %q", got, want)
	}
}

func TestNormalizerGrantedToolNamingAnOutsidePathIsReported(t *testing.T) {
	ws, project := openWorkspace(t)
	n := newTestNormalizer(t)
	var errs []presenters.ErrorPayload
	emit := func(p presenters.Payload) {
		if e, ok := p.(presenters.ErrorPayload); ok {
			errs = append(errs, e)
		}
	}
	n.startTurn("u", "a")
	inside := filepath.Join(project, "a.go")
	n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"w","title":"Write","kind":"edit","rawInput":{"file_path":"`+inside+`"}}`), emit)
	n.granted("w", []string{inside}, ws, emit)
	n.apply(update(t, `{"sessionUpdate":"tool_call_update","toolCallId":"w","status":"in_progress","rawInput":{"file_path":"`+inside+`","content":"x"}}`), emit)
	if len(errs) != 0 {
		t.Fatalf("inside paths reported: %+v", errs)
	}
	n.apply(update(t, `{"sessionUpdate":"tool_call_update","toolCallId":"w","rawInput":{"file_path":"~/.ssh/authorized_keys"}}`), emit)
	n.apply(update(t, `{"sessionUpdate":"tool_call_update","toolCallId":"w","status":"completed"}`), emit)
	if len(errs) != 1 || errs[0].Code != "policy_violation" || errs[0].MessageID != "a" ||
		!strings.Contains(errs[0].Message, "~/.ssh/authorized_keys") || !strings.Contains(errs[0].Message, "(w,") {
		t.Fatalf("errors %+v: want one policy_violation naming the tool and the path", errs)
	}
	// An ungranted tool call is the permission request's business, not reported here.
	n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"v","title":"Write","kind":"edit","locations":[{"path":"/etc/passwd"}]}`), emit)
	if len(errs) != 1 {
		t.Fatalf("ungranted tool reported: %+v", errs[1:])
	}
}

// The session asks showsLiveTerminal after every update; with many tool calls in a
// turn that must not cost a walk over them.
func BenchmarkNormalizerToolBurst(b *testing.B) {
	n := &normalizer{log: discardLog(), sessionID: "s", workspace: "/ws", newID: func() string { return "id" }}
	n.startTurn("u", "a")
	emit := func(presenters.Payload) {}
	var u sdk.SessionUpdate
	if err := json.Unmarshal([]byte(`{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"in_progress"}`), &u); err != nil {
		b.Fatal(err)
	}
	for i := range 2000 {
		id := fmt.Sprintf("t%d", i)
		u.ToolCallUpdate.ToolCallId = sdk.ToolCallId(id)
		n.apply(u, emit)
	}
	b.ResetTimer()
	for i := range b.N {
		u.ToolCallUpdate.ToolCallId = sdk.ToolCallId(fmt.Sprintf("t%d", i%2000))
		n.apply(u, emit)
		if n.showsLiveTerminal() {
			b.Fatal("no tool shows a terminal")
		}
	}
}

// refreshShownTerminals does what the session's terminal follower does: read the live
// terminals the turn shows and apply their states.
func refreshShownTerminals(n *normalizer, emit emitFunc) {
	states := map[string]presenters.TerminalBlock{}
	for _, id := range n.liveTerminalIDs() {
		if now, ok := n.terminals.terminalBlock(id); ok {
			states[id] = now
		}
	}
	n.applyTerminals(states, emit)
}

// codex-acp runs its commands itself: their output arrives in _meta.terminal_output_delta
// and their exit in _meta.terminal_exit, for a terminal agenticd does not know. They are
// the tool call's terminal output and exit status; live events carry what is new.
func TestNormalizerShowsTheAgentsOwnTerminalOutput(t *testing.T) {
	n := newTestNormalizer(t)
	n.startTurn("u", "a")
	var events []presenters.Payload
	emit := func(p presenters.Payload) { events = append(events, p) }
	for _, js := range []string{
		`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Run make","kind":"execute","status":"in_progress",` +
			`"rawInput":{"command":["bash","-lc","make"]},"content":[{"type":"terminal","terminalId":"c1"}],` +
			`"_meta":{"terminal_info":{"terminal_id":"c1","cwd":"/ws"}}}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"c1","_meta":{"terminal_output_delta":{"data":"cc -o a\n","terminal_id":"c1"}}}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"c1","_meta":{"terminal_output_delta":{"data":"error: x\n","terminal_id":"c1"}}}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"failed","_meta":{"terminal_exit":{"exit_code":2,"signal":null,"terminal_id":"c1"}}}`,
	} {
		n.apply(update(t, js), emit)
	}
	var outputs []string
	for _, p := range events[:len(events)-1] {
		switch v := p.(type) {
		case presenters.ToolStartPayload:
			outputs = append(outputs, v.Tool.Content[0].Terminal.Output)
		case presenters.ToolRunningPayload:
			outputs = append(outputs, v.Tool.Content[0].Terminal.Output)
		}
	}
	if want := []string{"", "cc -o a\n", "error: x\n"}; !reflect.DeepEqual(outputs, want) {
		t.Errorf("live output %q, want %q", outputs, want)
	}
	end, ok := events[len(events)-1].(presenters.ToolEndPayload)
	if !ok || len(end.Tool.Content) != 1 || end.Tool.Content[0].Terminal == nil {
		t.Fatalf("last event %#v, want TOOL_END with the terminal", events[len(events)-1])
	}
	tb := end.Tool.Content[0].Terminal
	if tb.Output != "cc -o a\nerror: x\n" || tb.ExitCode == nil || *tb.ExitCode != 2 || tb.Command != "make" {
		t.Errorf("ended terminal %+v (exit %v)", tb, tb.ExitCode)
	}
	if got := n.msg.blocks[0].Tool.Content[0].Terminal.Output; got != tb.Output {
		t.Errorf("stored message output %q", got)
	}

	// Output without terminal content still shows, after the call's content.
	n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"c2","title":"ls","kind":"execute",`+
		`"_meta":{"terminal_output_delta":{"data":"a.go\n","terminal_id":"c2"}}}`), emit)
	if c := n.tools["c2"].call.Content; len(c) != 1 || c[0].Terminal == nil || c[0].Terminal.Output != "a.go\n" {
		t.Errorf("output of a call without terminal content: %+v", c)
	}
}
