package acp

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

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
		log: discardLog(), sessionID: "s", workspace: "/ws", classify: risk.Classify,
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
		{"a user chunk during a turn is shown as the user's message",
			[]string{`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"echo"}}`},
			[]string{`DELTA user u "echo"`}},
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
	msg := n.endTurn().snapshot(presenters.MessageComplete)
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
	if want := risk.Classify("rm -rf /", "/ws"); *info != want || (info.RiskLevel != presenters.RiskCritical && info.RiskLevel != presenters.RiskHigh) {
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

func TestNormalizerCancelEndsUnfinishedToolsAndFollowsTerminals(t *testing.T) {
	n := newTestNormalizer(t)
	output := "one\n"
	n.terminal = func(id string) (presenters.TerminalBlock, bool) {
		return presenters.TerminalBlock{TerminalID: id, Command: "make", Output: output}, id == "term-1"
	}
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
	if n.refreshTerminals(emit); len(got) != 0 {
		t.Fatalf("unchanged output emitted %v", got)
	}
	output = "one\ntwo\n"
	n.refreshTerminals(emit)
	if want := []string{`TOOL_RUNNING run execute in_progress "make"`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("refresh emitted %q, want %q", got, want)
	}
	if c := n.tools["run"].call.Content[0].Terminal; c.Output != "one\ntwo\n" {
		t.Fatalf("terminal output %q after refresh", c.Output)
	}
	got = nil
	n.cancelUnfinished(emit)
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
