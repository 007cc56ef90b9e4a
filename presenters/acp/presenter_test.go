package acp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// richScript covers every update kind, a file read, modes, a config option of
// category model and commands sent right after session/new.
const richScript = `{
 "agent": {"image": true, "embeddedContext": true, "close": true},
 "session": {
  "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]},
  "configOptions": [{"type": "select", "id": "model", "name": "Model", "category": "model", "currentValue": "fast",
    "options": [{"value": "fast", "name": "Fast"}, {"value": "smart", "name": "Smart"}]}],
  "afterNew": [{"update": {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "review", "description": "Review", "input": {"hint": "path"}}]}}]
 },
 "turns": [[
  {"thought": "thinking"},
  {"text": "Hello "},
  {"text": "world"},
  {"update": {"sessionUpdate": "plan", "entries": [{"content": "read a.txt", "status": "in_progress", "priority": "high"}]}},
  {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read a.txt", "kind": "read", "status": "pending", "locations": [{"path": "{cwd}/a.txt"}]}},
  {"read": {"path": "{cwd}/a.txt"}},
  {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed", "content": [{"type": "content", "content": {"type": "text", "text": "file body"}}]}},
  {"update": {"sessionUpdate": "usage_update", "used": 1000, "size": 200000}},
  {"update": {"sessionUpdate": "session_info_update", "title": "Reading a.txt"}},
  {"update": {"sessionUpdate": "current_mode_update", "currentModeId": "code"}},
  {"update": {"sessionUpdate": "config_option_update", "configOptions": [{"type": "select", "id": "model", "name": "Model", "category": "model", "currentValue": "smart",
    "options": [{"value": "fast", "name": "Fast"}, {"value": "smart", "name": "Smart"}]}]}},
  {"raw": {"sessionUpdate": "brand_new_kind", "content": {"type": "text", "text": "must not show"}}},
  {"stop": "end_turn", "usage": {"inputTokens": 0, "outputTokens": 30, "totalTokens": 30}}
 ]]
}`

func TestSessionTurnNormalizesEveryUpdateKindAndIsStored(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.ws, "a.txt"), []byte("contents of a"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := h.presenter(h.config(richScript))
	ctx := testContext(t)

	if st := p.Describe(ctx).Status; st != presenters.AgentNotStarted {
		t.Fatalf("status before first use %s, want not_started (Describe must not start the agent)", st)
	}
	info, err := p.CreateSession(ctx, presenters.SessionConfig{Workspace: h.opened(h.ws)})
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Describe(ctx); d.Status != presenters.AgentReady || d.Implementation != (presenters.Implementation{Name: "testagent", Version: "1.0.0"}) {
		t.Fatalf("agent %+v, want ready with its implementation", d)
	}
	if info.Status != presenters.SessionIdle || info.Workspace != h.ws || info.CurrentModeID != "ask" || len(info.AvailableModes) != 2 ||
		info.CurrentModelID != "fast" || len(info.AvailableModels) != 2 || !info.Capabilities.SupportsModes || !info.Capabilities.SupportsModels {
		t.Fatalf("created session %+v", info)
	}
	h.rec.waitFrom(t, 0, "commands", func(ev presenters.Event) bool {
		u, ok := ev.Payload.(presenters.SessionUpdatedPayload)
		return ok && u.Patch.AvailableCommands != nil
	})
	if got := p.snapshotCommands(t, info.SessionID); !reflect.DeepEqual(got, []presenters.Command{{Name: "review", Description: "Review", InputHint: "path"}}) {
		t.Fatalf("commands %+v", got)
	}

	from := h.rec.len()
	res, err := p.SendMessage(ctx, info.SessionID, presenters.TextContent("please read a.txt"), presenters.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.SendMessage(ctx, info.SessionID, presenters.TextContent("again"), presenters.SendOptions{}); !errors.Is(err, presenters.ErrSessionBusy) {
		t.Fatalf("second SendMessage during a turn: %v, want ErrSessionBusy", err)
	}
	h.rec.waitFrom(t, from, "the turn's end", isEnd(res.MessageID))
	h.rec.waitFrom(t, from, "idle", func(ev presenters.Event) bool {
		s, ok := ev.Payload.(presenters.StatusChangedPayload)
		return ok && s.Status == presenters.SessionIdle
	})
	got := timeline(h.rec.eventsOf(info.SessionID, from), map[string]string{res.MessageID: "A", res.UserMessageID: "U"})
	want := []string{
		`DELTA user U "please read a.txt"`,
		`END user U `,
		`SESSION_UPDATED title=please read a.txt`,
		`STATUS generating`,
		`BLOCK assistant A reasoning "thinking"`,
		`DELTA assistant A "Hello "`,
		`DELTA assistant A "world"`,
		`BLOCK A plan [read a.txt/in_progress/high]`,
		`TOOL_START t1 read pending "Read a.txt"`,
		`DELTA assistant A "read: contents of a"`,
		`TOOL_END t1 read completed "Read a.txt"`,
		`SESSION_UPDATED usage=-/1000`,
		`SESSION_UPDATED title=Reading a.txt`,
		`SESSION_UPDATED mode=code`,
		`SESSION_UPDATED model=smart`,
		`END assistant A end_turn usage=30`,
		`SESSION_UPDATED usage=30/1000`,
		`STATUS idle`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("turn events:\n got %q\nwant %q", got, want)
	}

	msgs, err := p.GetMessages(ctx, info.SessionID, presenters.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].ID != res.UserMessageID || msgs[1].ID != res.MessageID {
		t.Fatalf("stored messages %+v", msgs)
	}
	user, reply := msgs[0], msgs[1]
	if user.Role != presenters.RoleUser || len(user.Blocks) != 1 || user.Blocks[0].Text != "please read a.txt" {
		t.Fatalf("stored user message %+v", user)
	}
	if reply.Status != presenters.MessageComplete || reply.StopReason != presenters.StopEndTurn || reply.Usage == nil || !reportedAs(reply.Usage.TotalTokens, 30) {
		t.Fatalf("stored reply %+v", reply)
	}
	var kinds []string
	for _, b := range reply.Blocks {
		kinds = append(kinds, string(b.Type))
	}
	if want := []string{"reasoning", "text", "plan", "tool", "text"}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("stored blocks %v, want %v", kinds, want)
	}
	if reply.Blocks[1].Text != "Hello world" || reply.Blocks[3].Tool.Status != presenters.ToolCompleted ||
		reply.Blocks[3].Tool.Content[0].Text != "file body" || reply.Blocks[4].Text != "read: contents of a" {
		t.Fatalf("stored reply blocks %+v", reply.Blocks)
	}
	got2, err := p.GetSession(ctx, info.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if got2.Title != "Reading a.txt" || got2.CurrentModeID != "code" || got2.CurrentModelID != "smart" ||
		!reportedAs(got2.Usage.TotalTokens, 30) || !reportedAs(got2.Usage.ContextUsed, 1000) || got2.MessageCount != 2 || got2.MessageInFlight != "" {
		t.Fatalf("session after the turn %+v", got2)
	}
	// The agent reported zero input tokens and no cache or reasoning counts, nor a cost.
	for _, u := range []presenters.TokenUsage{*reply.Usage, got2.Usage} {
		if !reportedAs(u.InputTokens, 0) || u.CachedInputTokens != nil || u.ReasoningTokens != nil || u.Cost != nil {
			t.Errorf("usage %s: want input reported as 0, cached, reasoning and cost unreported", usageString(u))
		}
	}
}

func reportedAs(count *int64, want int64) bool { return count != nil && *count == want }

func usageString(u presenters.TokenUsage) string {
	show := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatInt(*v, 10)
	}
	return fmt.Sprintf("in %s out %s total %s cached %s reasoning %s used %s size %s cost set %t",
		show(u.InputTokens), show(u.OutputTokens), show(u.TotalTokens), show(u.CachedInputTokens),
		show(u.ReasoningTokens), show(u.ContextUsed), show(u.ContextSize), u.Cost != nil)
}

// snapshotCommands reads a session's commands.
func (p *Presenter) snapshotCommands(t *testing.T, id string) []presenters.Command {
	t.Helper()
	info, err := p.GetSession(testContext(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return info.AvailableCommands
}
