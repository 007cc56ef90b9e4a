package acp

import (
	"reflect"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// Tools are named by the tool call's top-level name, else by the names adapters put in
// _meta (Claude's claudeCode.toolName, qwen's toolName), not by their kind alone; and a
// command codex runs itself shows its output and exit status.
func TestToolsAreNamedAndShowTheAgentsOwnCommandOutput(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[
  {"raw": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read a", "kind": "read", "name": "read_file",
    "_meta": {"claudeCode": {"toolName": "Read"}}}},
  {"raw": {"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "Grep", "kind": "search", "_meta": {"claudeCode": {"toolName": "Grep"}}}},
  {"raw": {"sessionUpdate": "tool_call", "toolCallId": "t3", "title": "Write", "kind": "edit", "_meta": {"toolName": "write_file"}}},
  {"raw": {"sessionUpdate": "tool_call", "toolCallId": "t4", "title": "Edit", "kind": "edit"}},
  {"raw": {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "make", "kind": "execute", "status": "in_progress",
    "rawInput": {"command": "make"}, "content": [{"type": "terminal", "terminalId": "c1"}]}},
  {"raw": {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "_meta": {"terminal_output_delta": {"data": "built\n", "terminal_id": "c1"}}}},
  {"raw": {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
    "_meta": {"terminal_exit": {"exit_code": 0, "signal": null, "terminal_id": "c1"}}}},
  {"stop": "end_turn"}
]]}`))
	info := h.create(p)
	res, from := h.send(p, info.SessionID, "go")
	h.finish(info.SessionID, res, from)
	names := map[string]string{}
	var end *presenters.ToolCall
	for _, ev := range h.rec.eventsOf(info.SessionID, from) {
		switch v := ev.Payload.(type) {
		case presenters.ToolStartPayload:
			names[v.Tool.ToolID] = v.Tool.ToolName
		case presenters.ToolEndPayload:
			if v.Tool.ToolID == "c1" {
				end = &v.Tool
			}
		}
	}
	want := map[string]string{"t1": "read_file", "t2": "Grep", "t3": "write_file", "t4": "edit", "c1": "execute"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("tool names %v, want %v", names, want)
	}
	if end == nil || len(end.Content) != 1 || end.Content[0].Terminal == nil {
		t.Fatalf("codex's command ended as %+v, want its terminal", end)
	}
	if tb := end.Content[0].Terminal; tb.Output != "built\n" || tb.ExitCode == nil || *tb.ExitCode != 0 {
		t.Errorf("codex's command terminal %+v", tb)
	}
}
