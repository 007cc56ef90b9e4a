package acp

import (
	"reflect"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// Notices and compaction reports are action blocks, not text of the answer: the ACP
// kinds the SDK does not know, and the notices claude-agent-acp sends as text to
// clients that do not declare notices. plan_update is the plan block.
func TestNoticesCompactionAndPlanUpdatesAreEvents(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[
  {"text": "Hello"},
  {"raw": {"sessionUpdate": "notice", "severity": "warning", "title": "Rate limited", "description": "retrying in 5s"}},
  {"raw": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Context left until auto-compact: 5%"},
    "_meta": {"claudeCode": {"kind": "informational", "level": "info"}}}},
  {"raw": {"sessionUpdate": "compaction_update", "compactionId": "k1", "status": "in_progress"}},
  {"raw": {"sessionUpdate": "compaction_summary_chunk", "compactionId": "k1", "content": {"type": "text", "text": "we fixed "}}},
  {"raw": {"sessionUpdate": "compaction_summary_chunk", "compactionId": "k1", "content": {"type": "text", "text": "the test"}}},
  {"raw": {"sessionUpdate": "compaction_update", "compactionId": "k1", "status": "completed"}},
  {"raw": {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p", "entries": [{"content": "read", "status": "completed", "priority": "high"}]}}},
  {"raw": {"sessionUpdate": "plan_update", "plan": {"type": "markdown", "planId": "p", "content": "1. write"}}},
  {"text": " world"},
  {"stop": "end_turn"}
]]}`))
	info := h.create(p)
	res, from := h.send(p, info.SessionID, "go")
	h.finish(info.SessionID, res, from)
	var got []string
	for _, ev := range h.rec.eventsOf(info.SessionID, from) {
		switch v := ev.Payload.(type) {
		case presenters.MessageDeltaPayload:
			if v.Role == presenters.RoleAssistant {
				got = append(got, "text "+v.Text)
			}
		case presenters.MessageBlockPayload:
			switch {
			case v.Block.Action != nil:
				got = append(got, v.Block.Action.ActionType+" "+v.Block.Action.Description)
			case v.Block.Plan != nil:
				for _, e := range v.Block.Plan.Entries {
					got = append(got, "plan "+e.Content+"/"+e.Status)
				}
			}
		}
	}
	want := []string{
		"text Hello",
		"notice warning: Rate limited\nretrying in 5s",
		"notice Context left until auto-compact: 5%",
		"compaction Compacting the conversation",
		"compaction Compacted the conversation. Summary:\nwe fixed the test",
		"plan read/completed",
		"plan 1. write/",
		"text  world",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
	msgs, err := p.GetMessages(testContext(t), info.SessionID, presenters.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for _, b := range msgs[len(msgs)-1].Blocks {
		if b.Type == presenters.BlockText {
			text += b.Text
		}
	}
	if text != "Hello world" {
		t.Errorf("stored answer text %q, want only the answer", text)
	}
}
