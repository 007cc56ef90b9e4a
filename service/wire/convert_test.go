package wire

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

func TestEventToPBCoversEveryPayload(t *testing.T) {
	status := presenters.SessionGenerating
	cases := []struct {
		payload presenters.Payload
		field   string
	}{
		{presenters.SessionCreatedPayload{Session: presenters.SessionInfo{SessionID: "s"}}, "session_created"},
		{presenters.SessionReadyPayload{MessageCount: 3}, "session_ready"},
		{presenters.SessionUpdatedPayload{Patch: presenters.SessionPatch{Status: &status}}, "session_updated"},
		{presenters.SessionClosedPayload{Reason: "r"}, "session_closed"},
		{presenters.MessageDeltaPayload{MessageID: "m", Text: "t", Role: presenters.RoleAssistant}, "message_delta"},
		{presenters.MessageBlockPayload{MessageID: "m", Block: presenters.Block{Type: presenters.BlockText}}, "message_block"},
		{presenters.MessageEndPayload{MessageID: "m", StopReason: presenters.StopRefusal}, "message_end"},
		{presenters.ToolStartPayload{MessageID: "m", Tool: presenters.ToolCall{ToolID: "t"}}, "tool_start"},
		{presenters.ToolRunningPayload{MessageID: "m", Tool: presenters.ToolCall{ToolID: "t"}}, "tool_running"},
		{presenters.ToolEndPayload{MessageID: "m", Tool: presenters.ToolCall{ToolID: "t"}}, "tool_end"},
		{presenters.PermissionRequiredPayload{Request: presenters.PermissionRequest{RequestID: "r"}}, "tool_permission_required"},
		{presenters.PermissionGrantedPayload{RequestID: "r", DecidedBy: presenters.DecidedByPolicy}, "tool_permission_granted"},
		{presenters.PermissionDeniedPayload{RequestID: "r", DecidedBy: presenters.DecidedByCancelled}, "tool_permission_denied"},
		{presenters.StatusChangedPayload{Status: presenters.SessionPaused}, "status_changed"},
		{presenters.ErrorPayload{Code: "agent_crashed", Message: "restart it", Retryable: true}, "error"},
		{presenters.AgentStatusChangedPayload{Info: presenters.AgentInfo{ID: "a", Status: presenters.AgentCrashed}}, "agent_status_changed"},
		{presenters.ElicitationRequiredPayload{Request: presenters.ElicitationRequest{ElicitationID: "e", Mode: presenters.ElicitationForm,
			RequestedSchema: map[string]any{"type": "object"}}}, "elicitation_required"},
		{presenters.ElicitationResolvedPayload{ElicitationID: "e", Action: presenters.ElicitationAccept, Content: map[string]any{"x": 1.0},
			DecidedBy: presenters.ElicitationByUser}, "elicitation_resolved"},
		{presenters.MessageQueuedPayload{Message: presenters.QueuedMessage{MessageID: "m", UserMessageID: "u",
			Content: presenters.TextContent("later"), QueuedAt: time.Unix(3, 0)}}, "message_queued"},
		{presenters.MessageDequeuedPayload{MessageID: "m", UserMessageID: "u", Reason: presenters.DequeuedFailed, Detail: "d"}, "message_dequeued"},
		{presenters.MessageSteeredPayload{MessageID: "m", UserMessageID: "u"}, "message_steered"},
	}
	if len(cases) != len(eventTypes) {
		t.Fatalf("%d payloads tested, %d event types exist", len(cases), len(eventTypes))
	}
	for _, c := range cases {
		p, field := c.payload, c.field
		for _, replay := range []bool{false, true} {
			ev := eventToPB(presenters.Event{Sequence: 9, SessionID: "s", AgentID: "a", Time: time.Unix(5, 0), Replay: replay, Payload: p})
			which := ev.ProtoReflect().WhichOneof(ev.ProtoReflect().Descriptor().Oneofs().ByName("payload"))
			if which == nil || string(which.Name()) != field {
				t.Errorf("%T: payload field %v, want %s", p, which, field)
			}
			wantType := "AGENTIC_EVENT_TYPE_" + strings.ToUpper(field)
			if ev.GetType().String() != wantType || ev.GetSequence() != 9 || ev.GetEventTime().GetSeconds() != 5 || ev.GetReplay() != replay {
				t.Errorf("%T: type %v (want %s), sequence %d, time %v, replay %t (want %t)", p, ev.GetType(), wantType, ev.GetSequence(), ev.GetEventTime(), ev.GetReplay(), replay)
			}
		}
	}
	agent := eventToPB(presenters.Event{AgentID: "acp.x", Payload: presenters.AgentStatusChangedPayload{Info: presenters.AgentInfo{
		ID: "acp.x", Status: presenters.AgentReady, Implementation: presenters.Implementation{Name: "x", Version: "1", Title: "X"}}}})
	if a := agent.GetAgentStatusChanged().GetAgent(); agent.GetSessionId() != "" || a.GetStatus() != pb.AgentStatus_AGENT_STATUS_READY ||
		!proto.Equal(a.GetImplementation(), &pb.Implementation{Name: "x", Version: "1", Title: "X"}) {
		t.Errorf("agent event = %v", agent)
	}
	denied := eventToPB(presenters.Event{Payload: presenters.PermissionDeniedPayload{RequestID: "r", ToolID: "t", OptionID: "no", DecidedBy: presenters.DecidedByPolicy, Reason: "outside"}})
	if d := denied.GetToolPermissionDenied(); d.GetDecidedBy() != pb.PermissionDecider_PERMISSION_DECIDER_POLICY || d.GetReason() != "outside" || d.GetOptionId() != "no" || d.GetToolId() != "t" {
		t.Errorf("denied = %v", d)
	}
}

func TestValueFromJSON(t *testing.T) {
	cases := map[string]string{
		`{"path":"a.go","n":2}`: `{"n":2,"path":"a.go"}`,
		`["a",1,true,null]`:     `["a",1,true,null]`,
		`"echo hi"`:             `"echo hi"`,
		`not json {`:            `"not json {"`,
	}
	for in, want := range cases {
		got, err := protojson.Marshal(valueFromJSON(json.RawMessage(in)))
		if err != nil {
			t.Fatal(err)
		}
		var gotV, wantV any
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(want), &wantV); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotV, wantV) {
			t.Errorf("valueFromJSON(%s) = %s, want %s", in, got, want)
		}
	}
	if valueFromJSON(nil) != nil {
		t.Error("empty JSON should be an unset value")
	}
}

func TestSessionPatchToPB(t *testing.T) {
	mode, title := "code", "t"
	cmds := []presenters.Command{{Name: "review", InputHint: "branch"}}
	got := sessionPatchToPB(presenters.SessionPatch{CurrentModeID: &mode, Title: &title, AvailableCommands: &cmds})
	if strings.Join(got.GetUpdateMask().GetPaths(), ",") != "title,current_mode_id,available_commands" {
		t.Errorf("mask = %v", got.GetUpdateMask().GetPaths())
	}
	if got.GetSession().GetCurrentModeId() != "code" || got.GetSession().GetAvailableCommands()[0].GetInputHint() != "branch" ||
		got.GetSession().GetStatus() != pb.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		t.Errorf("session = %v", got.GetSession())
	}
	// Every SessionPatch field has a path, and each path names a SessionInfo field.
	status, reason, now := presenters.SessionIdle, "", time.Now()
	modes, models, caps, usage := []presenters.Mode{}, []presenters.Model{}, presenters.Capabilities{}, presenters.TokenUsage{}
	opts := []presenters.ConfigOption{}
	all := sessionPatchToPB(presenters.SessionPatch{Status: &status, StatusReason: &reason, Title: &title, UpdatedAt: &now,
		AvailableModes: &modes, CurrentModeID: &mode, AvailableModels: &models, CurrentModelID: &mode,
		AvailableCommands: &cmds, ConfigOptions: &opts, Capabilities: &caps, Usage: &usage})
	fields := (&pb.SessionInfo{}).ProtoReflect().Descriptor().Fields()
	for _, p := range all.GetUpdateMask().GetPaths() {
		if fields.ByName(protoreflect.Name(p)) == nil {
			t.Errorf("path %q is not a SessionInfo field", p)
		}
	}
	if len(all.GetUpdateMask().GetPaths()) != 12 {
		t.Errorf("a full patch has %d paths, want 12", len(all.GetUpdateMask().GetPaths()))
	}
}

func TestBlockToPB(t *testing.T) {
	exit := 2
	tool := &presenters.ToolCall{
		ToolID: "t", Kind: presenters.ToolExecute, Status: presenters.ToolFailed, Error: "exit 2",
		Arguments: json.RawMessage(`{"command":"make"}`), Result: json.RawMessage(`"oops"`),
		Locations:   []presenters.ToolLocation{{Path: "a.go", Line: 3}},
		CommandInfo: &presenters.CommandInfo{Command: "make", RiskLevel: presenters.RiskMedium},
		Content: []presenters.ToolContent{
			{Text: "out"},
			{Diff: &presenters.DiffBlock{Path: "a.go", NewText: "x"}},
			{Terminal: &presenters.TerminalBlock{TerminalID: "term", ExitCode: &exit, Output: "tail", OutputOffset: 4096}},
			{Image: &presenters.ImageBlock{MimeType: "image/png", Base64: "AAE="}},
			{Resource: &presenters.ResourceBlock{URI: "file:///r"}},
		},
	}
	blocks := map[string]presenters.Block{
		"text":            {Type: presenters.BlockText, Text: "hi"},
		"reasoning":       {Type: presenters.BlockReasoning, Text: "hmm"},
		"tool":            {Type: presenters.BlockTool, Tool: tool},
		"error":           {Type: presenters.BlockError, Error: &presenters.ErrorBlock{Message: "m", Code: "policy_violation"}},
		"image":           {Type: presenters.BlockImage, Image: &presenters.ImageBlock{URL: "https://x"}},
		"action":          {Type: presenters.BlockAction, Action: &presenters.ActionBlock{ActionType: "permission_request", Permission: &presenters.PermissionRequest{RequestID: "r"}}},
		"search":          {Type: presenters.BlockSearch, Search: &presenters.SearchBlock{Query: "q", Results: []presenters.SearchResult{{URL: "u"}}}},
		"mcp_ui_resource": {Type: presenters.BlockMcpUIResource, McpUIResource: &presenters.McpUIResourceBlock{URI: "ui://x"}},
		"plan":            {Type: presenters.BlockPlan, Plan: &presenters.PlanBlock{Entries: []presenters.PlanEntry{{Content: "c", Status: "in_progress", Priority: "high"}}}},
		"diff":            {Type: presenters.BlockDiff, Diff: &presenters.DiffBlock{Path: "p"}},
		"terminal":        {Type: presenters.BlockTerminal, Terminal: &presenters.TerminalBlock{TerminalID: "t"}},
		"resource":        {Type: presenters.BlockResource, Resource: &presenters.ResourceBlock{URI: "r"}},
	}
	for field, b := range blocks {
		out := blockToPB(b)
		which := out.ProtoReflect().WhichOneof(out.ProtoReflect().Descriptor().Oneofs().ByName("content"))
		if which == nil || string(which.Name()) != field {
			t.Errorf("%s block became %v", field, which)
		}
	}
	got := blockToPB(blocks["tool"]).GetTool()
	if got.GetKind() != pb.ToolKind_TOOL_KIND_EXECUTE || got.GetStatus() != pb.ToolStatus_TOOL_STATUS_FAILED ||
		got.GetArguments().GetStructValue().GetFields()["command"].GetStringValue() != "make" || got.GetResult().GetStringValue() != "oops" ||
		got.GetLocations()[0].GetLine() != 3 || got.GetCommandInfo().GetRiskLevel() != pb.RiskLevel_RISK_LEVEL_MEDIUM ||
		got.GetContent()[0].GetText() != "out" || got.GetContent()[1].GetDiff().GetNewText() != "x" ||
		got.GetContent()[2].GetTerminal().GetExitCode() != 2 || got.GetContent()[2].GetTerminal().GetOutputOffset() != 4096 ||
		string(got.GetContent()[3].GetImage().GetData()) != "\x00\x01" ||
		got.GetContent()[4].GetResource().GetUri() != "file:///r" {
		t.Errorf("tool = %v", got)
	}
	if r := blockToPB(blocks["error"]).GetError().GetReason(); r != pb.ErrorReason_ERROR_REASON_POLICY_VIOLATION {
		t.Errorf("error block reason = %v", r)
	}
	plan := blockToPB(blocks["plan"]).GetPlan().GetEntries()[0]
	if plan.GetStatus() != pb.PlanEntryStatus_PLAN_ENTRY_STATUS_IN_PROGRESS || plan.GetPriority() != pb.PlanEntryPriority_PLAN_ENTRY_PRIORITY_HIGH {
		t.Errorf("plan entry = %v", plan)
	}
	// A block that names a variant without setting it keeps its text.
	if got := blockToPB(presenters.Block{Type: presenters.BlockDiff, Text: "raw"}); got.GetText().GetText() != "raw" {
		t.Errorf("incomplete block = %v", got)
	}
}

func TestPermissionRequestToPBCarriesWhatIsAboutToHappen(t *testing.T) {
	got := permissionRequestToPB(presenters.PermissionRequest{RequestID: "r",
		CommandInfo: &presenters.CommandInfo{Command: "make test", Cwd: "/ws/sub"},
		Diffs:       []presenters.DiffBlock{{Path: "/ws/a.go", OldText: "a", NewText: "b"}, {Path: "/ws/new.go", NewText: "n"}}})
	if got.GetCommandInfo().GetCwd() != "/ws/sub" || len(got.GetDiffs()) != 2 || got.GetDiffs()[0].GetPath() != "/ws/a.go" ||
		got.GetDiffs()[0].GetOldText() != "a" || got.GetDiffs()[1].GetNewText() != "n" {
		t.Errorf("request = %v", got)
	}
}

// A count the agent reported is on the wire, zero included; one it did not report is
// absent.
func TestUsageToPBTellsZeroFromAbsent(t *testing.T) {
	got := usageToPB(presenters.TokenUsage{InputTokens: presenters.Reported[int64](0), OutputTokens: presenters.Reported[int64](7),
		Cost: presenters.Reported(0.0)})
	want := &pb.TokenUsage{InputTokens: proto.Int64(0), OutputTokens: proto.Int64(7), Cost: proto.Float64(0)}
	if !proto.Equal(got, want) {
		t.Fatalf("usage = %v, want %v", got, want)
	}
	if got.TotalTokens != nil || got.CachedInputTokens != nil || got.ContextUsed != nil {
		t.Fatalf("unreported counts on the wire: %v", got)
	}
}

// Every error code the presenters report has its ErrorReason: reasonOf would make an
// unknown one UNSPECIFIED. The codes are read from the presenters' sources, so a new
// code fails here until errors.proto has it.
func TestReasonOfKnowsEveryCodePresentersUse(t *testing.T) {
	codeLine := regexp.MustCompile(`(?i)\bcode\b`)
	code := regexp.MustCompile(`"([a-z]+(?:_[a-z]+)+)"`)
	seen := 0
	err := filepath.WalkDir("../../presenters", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if !codeLine.MatchString(line) {
				continue
			}
			for _, m := range code.FindAllStringSubmatch(line, -1) {
				seen++
				if reasonOf(m[1]) == pb.ErrorReason_ERROR_REASON_UNSPECIFIED {
					t.Errorf("%s:%d: code %q has no ErrorReason", path, i+1, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 10 {
		t.Fatalf("found only %d codes in the presenters' sources; the pattern no longer matches how they are written", seen)
	}
}
