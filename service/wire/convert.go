package wire

import (
	"encoding/base64"
	"encoding/json"
	"iter"
	"maps"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// Converters between the domain (presenters) and the wire (agentic.v1). Domain -> wire
// is total: an unknown enum string becomes UNSPECIFIED, and every string goes through
// clean, because proto3 refuses to encode a string that is not valid UTF-8 (one bad byte
// from an agent would otherwise make its event, and every stream replaying it, fail).
// Wire -> domain exists only for what clients send (message content, session config,
// option kinds).

var (
	agentTypes = map[presenters.AgentType]pb.AgentType{
		presenters.AgentTypeACP:      pb.AgentType_AGENT_TYPE_ACP,
		presenters.AgentTypeDeepChat: pb.AgentType_AGENT_TYPE_DEEPCHAT,
	}
	agentStatuses = map[presenters.AgentStatus]pb.AgentStatus{
		presenters.AgentNotStarted:         pb.AgentStatus_AGENT_STATUS_NOT_STARTED,
		presenters.AgentStarting:           pb.AgentStatus_AGENT_STATUS_STARTING,
		presenters.AgentReady:              pb.AgentStatus_AGENT_STATUS_READY,
		presenters.AgentNeedsAuth:          pb.AgentStatus_AGENT_STATUS_NEEDS_AUTH,
		presenters.AgentNeedsConfiguration: pb.AgentStatus_AGENT_STATUS_NEEDS_CONFIGURATION,
		presenters.AgentCrashed:            pb.AgentStatus_AGENT_STATUS_CRASHED,
	}
	sessionStatuses = map[presenters.SessionStatus]pb.SessionStatus{
		presenters.SessionIdle:       pb.SessionStatus_SESSION_STATUS_IDLE,
		presenters.SessionGenerating: pb.SessionStatus_SESSION_STATUS_GENERATING,
		presenters.SessionPaused:     pb.SessionStatus_SESSION_STATUS_PAUSED,
		presenters.SessionError:      pb.SessionStatus_SESSION_STATUS_ERROR,
		presenters.SessionClosed:     pb.SessionStatus_SESSION_STATUS_CLOSED,
	}
	riskLevels = map[presenters.RiskLevel]pb.RiskLevel{
		presenters.RiskLow:      pb.RiskLevel_RISK_LEVEL_LOW,
		presenters.RiskMedium:   pb.RiskLevel_RISK_LEVEL_MEDIUM,
		presenters.RiskHigh:     pb.RiskLevel_RISK_LEVEL_HIGH,
		presenters.RiskCritical: pb.RiskLevel_RISK_LEVEL_CRITICAL,
	}
	permissionTypes = map[presenters.PermissionType]pb.PermissionType{
		presenters.PermissionRead:    pb.PermissionType_PERMISSION_TYPE_READ,
		presenters.PermissionWrite:   pb.PermissionType_PERMISSION_TYPE_WRITE,
		presenters.PermissionCommand: pb.PermissionType_PERMISSION_TYPE_COMMAND,
		presenters.PermissionAll:     pb.PermissionType_PERMISSION_TYPE_ALL,
	}
	optionKinds = map[presenters.PermissionOptionKind]pb.PermissionOptionKind{
		presenters.AllowOnce:    pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE,
		presenters.AllowAlways:  pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ALWAYS,
		presenters.RejectOnce:   pb.PermissionOptionKind_PERMISSION_OPTION_KIND_REJECT_ONCE,
		presenters.RejectAlways: pb.PermissionOptionKind_PERMISSION_OPTION_KIND_REJECT_ALWAYS,
	}
	toolKinds = map[presenters.ToolKind]pb.ToolKind{
		presenters.ToolRead:       pb.ToolKind_TOOL_KIND_READ,
		presenters.ToolEdit:       pb.ToolKind_TOOL_KIND_EDIT,
		presenters.ToolDelete:     pb.ToolKind_TOOL_KIND_DELETE,
		presenters.ToolMove:       pb.ToolKind_TOOL_KIND_MOVE,
		presenters.ToolSearch:     pb.ToolKind_TOOL_KIND_SEARCH,
		presenters.ToolExecute:    pb.ToolKind_TOOL_KIND_EXECUTE,
		presenters.ToolThink:      pb.ToolKind_TOOL_KIND_THINK,
		presenters.ToolFetch:      pb.ToolKind_TOOL_KIND_FETCH,
		presenters.ToolSwitchMode: pb.ToolKind_TOOL_KIND_SWITCH_MODE,
		presenters.ToolOther:      pb.ToolKind_TOOL_KIND_OTHER,
	}
	toolStatuses = map[presenters.ToolStatus]pb.ToolStatus{
		presenters.ToolPending:    pb.ToolStatus_TOOL_STATUS_PENDING,
		presenters.ToolInProgress: pb.ToolStatus_TOOL_STATUS_IN_PROGRESS,
		presenters.ToolCompleted:  pb.ToolStatus_TOOL_STATUS_COMPLETED,
		presenters.ToolFailed:     pb.ToolStatus_TOOL_STATUS_FAILED,
		presenters.ToolCancelled:  pb.ToolStatus_TOOL_STATUS_CANCELLED,
	}
	planStatuses = map[string]pb.PlanEntryStatus{
		"pending":     pb.PlanEntryStatus_PLAN_ENTRY_STATUS_PENDING,
		"in_progress": pb.PlanEntryStatus_PLAN_ENTRY_STATUS_IN_PROGRESS,
		"completed":   pb.PlanEntryStatus_PLAN_ENTRY_STATUS_COMPLETED,
	}
	planPriorities = map[string]pb.PlanEntryPriority{
		"low":    pb.PlanEntryPriority_PLAN_ENTRY_PRIORITY_LOW,
		"medium": pb.PlanEntryPriority_PLAN_ENTRY_PRIORITY_MEDIUM,
		"high":   pb.PlanEntryPriority_PLAN_ENTRY_PRIORITY_HIGH,
	}
	roles = map[presenters.MessageRole]pb.MessageRole{
		presenters.RoleUser:      pb.MessageRole_MESSAGE_ROLE_USER,
		presenters.RoleAssistant: pb.MessageRole_MESSAGE_ROLE_ASSISTANT,
		presenters.RoleSystem:    pb.MessageRole_MESSAGE_ROLE_SYSTEM,
	}
	messageStatuses = map[presenters.MessageStatus]pb.MessageStatus{
		presenters.MessageComplete:   pb.MessageStatus_MESSAGE_STATUS_COMPLETE,
		presenters.MessageIncomplete: pb.MessageStatus_MESSAGE_STATUS_INCOMPLETE,
		presenters.MessageCancelled:  pb.MessageStatus_MESSAGE_STATUS_CANCELLED,
		presenters.MessageError:      pb.MessageStatus_MESSAGE_STATUS_ERROR,
	}
	stopReasons = map[presenters.StopReason]pb.StopReason{
		presenters.StopEndTurn:         pb.StopReason_STOP_REASON_END_TURN,
		presenters.StopMaxTokens:       pb.StopReason_STOP_REASON_MAX_TOKENS,
		presenters.StopMaxTurnRequests: pb.StopReason_STOP_REASON_MAX_TURN_REQUESTS,
		presenters.StopRefusal:         pb.StopReason_STOP_REASON_REFUSAL,
		presenters.StopCancelled:       pb.StopReason_STOP_REASON_CANCELLED,
		presenters.StopError:           pb.StopReason_STOP_REASON_ERROR,
		presenters.StopInterrupted:     pb.StopReason_STOP_REASON_INTERRUPTED,
	}
	deciders = map[presenters.PermissionDecider]pb.PermissionDecider{
		presenters.DecidedByUser:      pb.PermissionDecider_PERMISSION_DECIDER_USER,
		presenters.DecidedByPolicy:    pb.PermissionDecider_PERMISSION_DECIDER_POLICY,
		presenters.DecidedByCancelled: pb.PermissionDecider_PERMISSION_DECIDER_CANCELLED,
	}
	eventTypes = map[presenters.EventType]pb.AgenticEventType{
		presenters.EventSessionCreated:         pb.AgenticEventType_AGENTIC_EVENT_TYPE_SESSION_CREATED,
		presenters.EventSessionReady:           pb.AgenticEventType_AGENTIC_EVENT_TYPE_SESSION_READY,
		presenters.EventSessionUpdated:         pb.AgenticEventType_AGENTIC_EVENT_TYPE_SESSION_UPDATED,
		presenters.EventSessionClosed:          pb.AgenticEventType_AGENTIC_EVENT_TYPE_SESSION_CLOSED,
		presenters.EventMessageDelta:           pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_DELTA,
		presenters.EventMessageBlock:           pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_BLOCK,
		presenters.EventMessageEnd:             pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_END,
		presenters.EventToolStart:              pb.AgenticEventType_AGENTIC_EVENT_TYPE_TOOL_START,
		presenters.EventToolRunning:            pb.AgenticEventType_AGENTIC_EVENT_TYPE_TOOL_RUNNING,
		presenters.EventToolEnd:                pb.AgenticEventType_AGENTIC_EVENT_TYPE_TOOL_END,
		presenters.EventToolPermissionRequired: pb.AgenticEventType_AGENTIC_EVENT_TYPE_TOOL_PERMISSION_REQUIRED,
		presenters.EventToolPermissionGranted:  pb.AgenticEventType_AGENTIC_EVENT_TYPE_TOOL_PERMISSION_GRANTED,
		presenters.EventToolPermissionDenied:   pb.AgenticEventType_AGENTIC_EVENT_TYPE_TOOL_PERMISSION_DENIED,
		presenters.EventStatusChanged:          pb.AgenticEventType_AGENTIC_EVENT_TYPE_STATUS_CHANGED,
		presenters.EventError:                  pb.AgenticEventType_AGENTIC_EVENT_TYPE_ERROR,
		presenters.EventAgentStatusChanged:     pb.AgenticEventType_AGENTIC_EVENT_TYPE_AGENT_STATUS_CHANGED,
		presenters.EventElicitationRequired:    pb.AgenticEventType_AGENTIC_EVENT_TYPE_ELICITATION_REQUIRED,
		presenters.EventElicitationResolved:    pb.AgenticEventType_AGENTIC_EVENT_TYPE_ELICITATION_RESOLVED,
		presenters.EventMessageQueued:          pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_QUEUED,
		presenters.EventMessageDequeued:        pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_DEQUEUED,
		presenters.EventMessageSteered:         pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_STEERED,
	}
	dequeueReasons = map[presenters.DequeueReason]pb.DequeueReason{
		presenters.DequeuedStarted:   pb.DequeueReason_DEQUEUE_REASON_STARTED,
		presenters.DequeuedCancelled: pb.DequeueReason_DEQUEUE_REASON_CANCELLED,
		presenters.DequeuedFailed:    pb.DequeueReason_DEQUEUE_REASON_FAILED,
	}
)

// clean returns s as valid UTF-8, each invalid byte sequence replaced by U+FFFD. Valid
// strings (nearly all) are checked, not copied.
func clean(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// cleanAll is clean for a list; the list itself is returned when every entry is valid.
func cleanAll(ss []string) []string {
	for i, s := range ss {
		if !utf8.ValidString(s) {
			out := make([]string, len(ss))
			copy(out, ss[:i])
			for j := i; j < len(ss); j++ {
				out[j] = clean(ss[j])
			}
			return out
		}
	}
	return ss
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// valueFromJSON carries raw JSON (object, array, string, number...) as a Value; bytes that
// are not JSON travel as a string rather than being lost.
func valueFromJSON(raw json.RawMessage) *structpb.Value {
	if len(raw) == 0 {
		return nil
	}
	if !utf8.Valid(raw) {
		raw = []byte(strings.ToValidUTF8(string(raw), "\uFFFD"))
	}
	v := &structpb.Value{}
	if err := protojson.Unmarshal(raw, v); err != nil {
		return structpb.NewStringValue(string(raw))
	}
	return v
}

// AgentInfoToPB is an agent as ListAgents and GetAgent show it.
func AgentInfoToPB(a presenters.AgentInfo) *pb.AgentInfo {
	out := &pb.AgentInfo{
		AgentId:        clean(a.ID),
		Name:           clean(a.Name),
		Type:           agentTypes[a.Type],
		Description:    clean(a.Description),
		Status:         agentStatuses[a.Status],
		StatusReason:   clean(a.StatusReason),
		Capabilities:   capabilitiesToPB(a.Capabilities),
		Implementation: implementationToPB(a.Implementation),
		ConfigSource:   clean(a.ConfigSource),
		Confinement:    clean(a.Confinement),
	}
	for _, m := range a.AuthMethods {
		out.AuthMethods = append(out.AuthMethods, &pb.AuthMethod{Id: clean(m.ID), Name: clean(m.Name), Description: clean(m.Description)})
	}
	return out
}

func capabilitiesToPB(c presenters.Capabilities) *pb.Capabilities {
	return &pb.Capabilities{
		SupportsVision:    c.SupportsVision,
		SupportsTools:     c.SupportsTools,
		SupportsModes:     c.SupportsModes,
		SupportsCommands:  c.SupportsCommands,
		SupportsLoad:      c.SupportsLoad,
		SupportsModels:    c.SupportsModels,
		SupportsResources: c.SupportsResources,
		SupportsMcp:       c.SupportsMCP,
		SupportsMcpHttp:   c.SupportsMCPHTTP,

		SupportsAdditionalDirectories: c.SupportsAdditionalDirectories,
		SupportsDelete:                c.SupportsDelete,
		SupportsSessionList:           c.SupportsSessionList,
		SupportsLogout:                c.SupportsLogout,
		SupportsElicitation:           c.SupportsElicitation,
	}
}

func modesToPB(ms []presenters.Mode) []*pb.Mode {
	out := make([]*pb.Mode, len(ms))
	for i, m := range ms {
		out[i] = &pb.Mode{Id: clean(m.ID), Name: clean(m.Name), Description: clean(m.Description)}
	}
	return out
}

var configOptionTypes = map[presenters.ConfigOptionType]pb.ConfigOptionType{
	presenters.ConfigSelect:  pb.ConfigOptionType_CONFIG_OPTION_TYPE_SELECT,
	presenters.ConfigBoolean: pb.ConfigOptionType_CONFIG_OPTION_TYPE_BOOLEAN,
}

func configOptionsToPB(os []presenters.ConfigOption) []*pb.ConfigOption {
	out := make([]*pb.ConfigOption, len(os))
	for i, o := range os {
		c := &pb.ConfigOption{Id: clean(o.ID), Name: clean(o.Name), Description: clean(o.Description),
			Category: clean(o.Category), Type: configOptionTypes[o.Type], CurrentValue: clean(o.CurrentValue)}
		for _, ch := range o.Choices {
			c.Choices = append(c.Choices, &pb.ConfigChoice{Value: clean(ch.Value), Name: clean(ch.Name),
				Description: clean(ch.Description), Group: clean(ch.Group)})
		}
		out[i] = c
	}
	return out
}

func modelsToPB(ms []presenters.Model) []*pb.Model {
	out := make([]*pb.Model, len(ms))
	for i, m := range ms {
		out[i] = &pb.Model{Id: clean(m.ID), Name: clean(m.Name), Description: clean(m.Description)}
	}
	return out
}

func commandsToPB(cs []presenters.Command) []*pb.Command {
	out := make([]*pb.Command, len(cs))
	for i, c := range cs {
		out[i] = &pb.Command{Name: clean(c.Name), Description: clean(c.Description), InputHint: clean(c.InputHint)}
	}
	return out
}

// implementationToPB is nil for an unknown implementation.
func implementationToPB(i presenters.Implementation) *pb.Implementation {
	if i == (presenters.Implementation{}) {
		return nil
	}
	return &pb.Implementation{Name: clean(i.Name), Version: clean(i.Version), Title: clean(i.Title)}
}

// reported is a count as the wire carries it: absent when the agent did not report it,
// a copy (the domain value may be shared) when it did, zero included.
func reported[T int64 | float64](v *T) *T {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

func usageToPB(u presenters.TokenUsage) *pb.TokenUsage {
	return &pb.TokenUsage{
		InputTokens:       reported(u.InputTokens),
		OutputTokens:      reported(u.OutputTokens),
		TotalTokens:       reported(u.TotalTokens),
		CachedInputTokens: reported(u.CachedInputTokens),
		ReasoningTokens:   reported(u.ReasoningTokens),
		ContextUsed:       reported(u.ContextUsed),
		ContextSize:       reported(u.ContextSize),
		Cost:              reported(u.Cost),
		CostCurrency:      clean(u.CostCurrency),
	}
}

// SessionInfoToPB is a session as the presenter describes it; the hub's snapshot and the
// store's ownership are the service's to add.
func SessionInfoToPB(s presenters.SessionInfo) *pb.SessionInfo {
	out := &pb.SessionInfo{
		SessionId:      clean(s.SessionID),
		AgentSessionId: clean(s.AgentSessionID),
		Owner:          clean(s.Owner),

		AdditionalDirectories: cleanAll(s.AdditionalDirectories),
		McpServerNames:        cleanAll(s.MCPServerNames),
		AgentId:               clean(s.AgentID),
		Status:                sessionStatuses[s.Status],
		StatusReason:          clean(s.StatusReason),
		Workspace:             clean(s.Workspace),
		Title:                 clean(s.Title),
		CreateTime:            timestamp(s.CreatedAt),
		UpdateTime:            timestamp(s.UpdatedAt),
		AvailableModes:        modesToPB(s.AvailableModes),
		CurrentModeId:         clean(s.CurrentModeID),
		AvailableModels:       modelsToPB(s.AvailableModels),
		CurrentModelId:        clean(s.CurrentModelID),
		AvailableCommands:     commandsToPB(s.AvailableCommands),
		ConfigOptions:         configOptionsToPB(s.ConfigOptions),
		Capabilities:          capabilitiesToPB(s.Capabilities),
		Usage:                 usageToPB(s.Usage),
		MessageInFlight:       clean(s.MessageInFlight),
		LastSequence:          s.LastSequence,
		MessageCount:          s.MessageCount,
	}
	for _, r := range s.PendingPermissions {
		out.PendingPermissions = append(out.PendingPermissions, permissionRequestToPB(r))
	}
	for _, m := range s.QueuedMessages {
		out.QueuedMessages = append(out.QueuedMessages, queuedMessageToPB(m))
	}
	for _, r := range s.PendingElicitations {
		out.PendingElicitations = append(out.PendingElicitations, elicitationRequestToPB(r))
	}
	return out
}

// sessionPatchToPB is a SessionInfo with only the patch's fields set, and their paths.
func sessionPatchToPB(p presenters.SessionPatch) *pb.SessionUpdated {
	info := &pb.SessionInfo{}
	var paths []string
	if p.Status != nil {
		info.Status = sessionStatuses[*p.Status]
		paths = append(paths, "status")
	}
	if p.StatusReason != nil {
		info.StatusReason = clean(*p.StatusReason)
		paths = append(paths, "status_reason")
	}
	if p.Title != nil {
		info.Title = clean(*p.Title)
		paths = append(paths, "title")
	}
	if p.UpdatedAt != nil {
		info.UpdateTime = timestamp(*p.UpdatedAt)
		paths = append(paths, "update_time")
	}
	if p.AvailableModes != nil {
		info.AvailableModes = modesToPB(*p.AvailableModes)
		paths = append(paths, "available_modes")
	}
	if p.CurrentModeID != nil {
		info.CurrentModeId = clean(*p.CurrentModeID)
		paths = append(paths, "current_mode_id")
	}
	if p.AvailableModels != nil {
		info.AvailableModels = modelsToPB(*p.AvailableModels)
		paths = append(paths, "available_models")
	}
	if p.CurrentModelID != nil {
		info.CurrentModelId = clean(*p.CurrentModelID)
		paths = append(paths, "current_model_id")
	}
	if p.AvailableCommands != nil {
		info.AvailableCommands = commandsToPB(*p.AvailableCommands)
		paths = append(paths, "available_commands")
	}
	if p.ConfigOptions != nil {
		info.ConfigOptions = configOptionsToPB(*p.ConfigOptions)
		paths = append(paths, "config_options")
	}
	if p.Capabilities != nil {
		info.Capabilities = capabilitiesToPB(*p.Capabilities)
		paths = append(paths, "capabilities")
	}
	if p.Usage != nil {
		info.Usage = usageToPB(*p.Usage)
		paths = append(paths, "usage")
	}
	return &pb.SessionUpdated{Session: info, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}
}

func commandInfoToPB(c *presenters.CommandInfo) *pb.CommandInfo {
	if c == nil {
		return nil
	}
	return &pb.CommandInfo{
		Command:     clean(c.Command),
		RiskLevel:   riskLevels[c.RiskLevel],
		Reason:      clean(c.Reason),
		Suggestion:  clean(c.Suggestion),
		Signature:   clean(c.Signature),
		BaseCommand: clean(c.BaseCommand),
		Cwd:         clean(c.Cwd),
	}
}

func permissionRequestToPB(r presenters.PermissionRequest) *pb.PermissionRequest {
	out := &pb.PermissionRequest{
		PermissionId:   clean(r.RequestID),
		ToolId:         clean(r.ToolID),
		ToolName:       clean(r.ToolName),
		PermissionType: permissionTypes[r.PermissionType],
		Description:    clean(r.Description),
		CommandInfo:    commandInfoToPB(r.CommandInfo),
		Paths:          cleanAll(r.Paths),
		Rememberable:   r.Rememberable,
		ServerName:     clean(r.ServerName),
		Arguments:      valueFromJSON(r.Arguments),
		MessageId:      clean(r.MessageID),
		RequestTime:    timestamp(r.RequestedAt),
	}
	for _, o := range r.Options {
		out.Options = append(out.Options, &pb.PermissionOption{OptionId: clean(o.ID), Name: clean(o.Name), Kind: optionKinds[o.Kind]})
	}
	for i := range r.Diffs {
		out.Diffs = append(out.Diffs, diffToPB(&r.Diffs[i]))
	}
	return out
}

func diffToPB(d *presenters.DiffBlock) *pb.DiffBlock {
	if d == nil {
		return nil
	}
	return &pb.DiffBlock{Path: clean(d.Path), OldText: clean(d.OldText), NewText: clean(d.NewText)}
}

func terminalToPB(t *presenters.TerminalBlock) *pb.TerminalBlock {
	if t == nil {
		return nil
	}
	out := &pb.TerminalBlock{
		TerminalId:   clean(t.TerminalID),
		Command:      clean(t.Command),
		Output:       clean(t.Output),
		Truncated:    t.Truncated,
		Signal:       clean(t.Signal),
		OutputOffset: t.OutputOffset,
	}
	if t.ExitCode != nil {
		code := int32(*t.ExitCode)
		out.ExitCode = &code
	}
	return out
}

func imageToPB(i *presenters.ImageBlock) *pb.ImageBlock {
	if i == nil {
		return nil
	}
	out := &pb.ImageBlock{MimeType: clean(i.MimeType)}
	switch {
	case i.URL != "":
		out.Source = &pb.ImageBlock_Url{Url: clean(i.URL)}
	case i.Base64 != "":
		out.Source = &pb.ImageBlock_Data{Data: decodeBase64(i.Base64)}
	}
	return out
}

func resourceToPB(r *presenters.ResourceBlock) *pb.ResourceBlock {
	if r == nil {
		return nil
	}
	return &pb.ResourceBlock{Uri: clean(r.URI), Name: clean(r.Name), MimeType: clean(r.MimeType), Text: clean(r.Text), Blob: decodeBase64(r.Blob)}
}

func toolCallToPB(t presenters.ToolCall) *pb.ToolCall {
	out := &pb.ToolCall{
		ToolId:      clean(t.ToolID),
		ToolName:    clean(t.ToolName),
		Title:       clean(t.Title),
		Kind:        toolKinds[t.Kind],
		Status:      toolStatuses[t.Status],
		Arguments:   valueFromJSON(t.Arguments),
		Result:      valueFromJSON(t.Result),
		Error:       clean(t.Error),
		CommandInfo: commandInfoToPB(t.CommandInfo),
	}
	for _, l := range t.Locations {
		out.Locations = append(out.Locations, &pb.ToolLocation{Path: clean(l.Path), Line: int32(l.Line)})
	}
	for _, c := range t.Content {
		out.Content = append(out.Content, toolContentToPB(c))
	}
	return out
}

func toolContentToPB(c presenters.ToolContent) *pb.ToolContent {
	switch {
	case c.Diff != nil:
		return &pb.ToolContent{Content: &pb.ToolContent_Diff{Diff: diffToPB(c.Diff)}}
	case c.Terminal != nil:
		return &pb.ToolContent{Content: &pb.ToolContent_Terminal{Terminal: terminalToPB(c.Terminal)}}
	case c.Image != nil:
		return &pb.ToolContent{Content: &pb.ToolContent_Image{Image: imageToPB(c.Image)}}
	case c.Resource != nil:
		return &pb.ToolContent{Content: &pb.ToolContent_Resource{Resource: resourceToPB(c.Resource)}}
	default:
		return &pb.ToolContent{Content: &pb.ToolContent_Text{Text: clean(c.Text)}}
	}
}

func blockToPB(b presenters.Block) *pb.Block {
	switch b.Type {
	case presenters.BlockText:
		return &pb.Block{Content: &pb.Block_Text{Text: &pb.TextBlock{Text: clean(b.Text)}}}
	case presenters.BlockReasoning:
		return &pb.Block{Content: &pb.Block_Reasoning{Reasoning: &pb.ReasoningBlock{Text: clean(b.Text)}}}
	case presenters.BlockTool:
		if b.Tool != nil {
			return &pb.Block{Content: &pb.Block_Tool{Tool: toolCallToPB(*b.Tool)}}
		}
	case presenters.BlockError:
		if b.Error != nil {
			return &pb.Block{Content: &pb.Block_Error{Error: &pb.ErrorBlock{Message: clean(b.Error.Message), Reason: reasonOf(b.Error.Code)}}}
		}
	case presenters.BlockImage:
		if b.Image != nil {
			return &pb.Block{Content: &pb.Block_Image{Image: imageToPB(b.Image)}}
		}
	case presenters.BlockAction:
		if a := b.Action; a != nil {
			out := &pb.ActionBlock{ActionType: clean(a.ActionType), Description: clean(a.Description)}
			if a.Permission != nil {
				out.Permission = permissionRequestToPB(*a.Permission)
			}
			return &pb.Block{Content: &pb.Block_Action{Action: out}}
		}
	case presenters.BlockSearch:
		if s := b.Search; s != nil {
			out := &pb.SearchBlock{Query: clean(s.Query)}
			for _, r := range s.Results {
				out.Results = append(out.Results, &pb.SearchResult{Title: clean(r.Title), Url: clean(r.URL), Snippet: clean(r.Snippet)})
			}
			return &pb.Block{Content: &pb.Block_Search{Search: out}}
		}
	case presenters.BlockMcpUIResource:
		if r := b.McpUIResource; r != nil {
			return &pb.Block{Content: &pb.Block_McpUiResource{McpUiResource: &pb.McpUiResourceBlock{Uri: clean(r.URI), MimeType: clean(r.MimeType), Text: clean(r.Text)}}}
		}
	case presenters.BlockPlan:
		if p := b.Plan; p != nil {
			out := &pb.PlanBlock{}
			for _, e := range p.Entries {
				out.Entries = append(out.Entries, &pb.PlanEntry{Content: clean(e.Content), Status: planStatuses[e.Status], Priority: planPriorities[e.Priority]})
			}
			return &pb.Block{Content: &pb.Block_Plan{Plan: out}}
		}
	case presenters.BlockDiff:
		if b.Diff != nil {
			return &pb.Block{Content: &pb.Block_Diff{Diff: diffToPB(b.Diff)}}
		}
	case presenters.BlockTerminal:
		if b.Terminal != nil {
			return &pb.Block{Content: &pb.Block_Terminal{Terminal: terminalToPB(b.Terminal)}}
		}
	case presenters.BlockResource:
		if b.Resource != nil {
			return &pb.Block{Content: &pb.Block_Resource{Resource: resourceToPB(b.Resource)}}
		}
	}
	// A block whose Type names no set variant: keep its text rather than drop it.
	return &pb.Block{Content: &pb.Block_Text{Text: &pb.TextBlock{Text: clean(b.Text)}}}
}

// MessageToPB is a stored message as ListMessages and WaitMessage return it.
func MessageToPB(m presenters.Message) *pb.SessionMessage {
	out := &pb.SessionMessage{
		MessageId:  clean(m.ID),
		SessionId:  clean(m.SessionID),
		Role:       roles[m.Role],
		Status:     messageStatuses[m.Status],
		CreateTime: timestamp(m.CreatedAt),
		StopReason: stopReasons[m.StopReason],
		Blocks:     make([]*pb.Block, len(m.Blocks)),
		Principal:  clean(m.Sender),
	}
	for i, b := range m.Blocks {
		out.Blocks[i] = blockToPB(b)
	}
	if m.Usage != nil {
		out.Usage = usageToPB(*m.Usage)
	}
	return out
}

func decisionToGranted(d presenters.PermissionDecision) *pb.ToolPermissionGranted {
	return &pb.ToolPermissionGranted{PermissionId: clean(d.RequestID), ToolId: clean(d.ToolID), OptionId: clean(d.OptionID), DecidedBy: deciders[d.DecidedBy], Reason: clean(d.Reason), Principal: clean(d.Principal)}
}

func decisionToDenied(d presenters.PermissionDecision) *pb.ToolPermissionDenied {
	return &pb.ToolPermissionDenied{PermissionId: clean(d.RequestID), ToolId: clean(d.ToolID), OptionId: clean(d.OptionID), DecidedBy: deciders[d.DecidedBy], Reason: clean(d.Reason), Principal: clean(d.Principal)}
}

// eventToPB converts one event; the hub calls it once per event and shares the result.
func eventToPB(ev presenters.Event) *pb.AgenticEvent {
	out := &pb.AgenticEvent{
		Sequence:  ev.Sequence,
		SessionId: clean(ev.SessionID),
		AgentId:   clean(ev.AgentID),
		EventTime: timestamp(ev.Time),
		Replay:    ev.Replay,
	}
	if ev.Payload == nil {
		return out
	}
	out.Type = eventTypes[ev.Payload.EventType()]
	switch p := ev.Payload.(type) {
	case presenters.SessionCreatedPayload:
		out.Payload = &pb.AgenticEvent_SessionCreated{SessionCreated: &pb.SessionCreated{Session: SessionInfoToPB(p.Session)}}
	case presenters.SessionReadyPayload:
		out.Payload = &pb.AgenticEvent_SessionReady{SessionReady: &pb.SessionReady{MessageCount: p.MessageCount, Principal: clean(p.Principal)}}
	case presenters.SessionUpdatedPayload:
		out.Payload = &pb.AgenticEvent_SessionUpdated{SessionUpdated: sessionPatchToPB(p.Patch)}
	case presenters.SessionClosedPayload:
		out.Payload = &pb.AgenticEvent_SessionClosed{SessionClosed: &pb.SessionClosed{Reason: clean(p.Reason), Principal: clean(p.Principal)}}
	case presenters.MessageDeltaPayload:
		out.Payload = &pb.AgenticEvent_MessageDelta{MessageDelta: &pb.MessageDelta{MessageId: clean(p.MessageID), Text: clean(p.Text), Role: roles[p.Role]}}
	case presenters.MessageBlockPayload:
		out.Payload = &pb.AgenticEvent_MessageBlock{MessageBlock: &pb.MessageBlock{MessageId: clean(p.MessageID), Block: blockToPB(p.Block), Role: roles[p.Role]}}
	case presenters.MessageEndPayload:
		end := &pb.MessageEnd{MessageId: clean(p.MessageID), StopReason: stopReasons[p.StopReason], Role: roles[p.Role], Principal: clean(p.Principal)}
		if p.Usage != nil {
			end.Usage = usageToPB(*p.Usage)
		}
		out.Payload = &pb.AgenticEvent_MessageEnd{MessageEnd: end}
	case presenters.ToolStartPayload:
		out.Payload = &pb.AgenticEvent_ToolStart{ToolStart: &pb.ToolStart{MessageId: clean(p.MessageID), Tool: toolCallToPB(p.Tool)}}
	case presenters.ToolRunningPayload:
		out.Payload = &pb.AgenticEvent_ToolRunning{ToolRunning: &pb.ToolRunning{MessageId: clean(p.MessageID), Tool: toolCallToPB(p.Tool)}}
	case presenters.ToolEndPayload:
		out.Payload = &pb.AgenticEvent_ToolEnd{ToolEnd: &pb.ToolEnd{MessageId: clean(p.MessageID), Tool: toolCallToPB(p.Tool)}}
	case presenters.PermissionRequiredPayload:
		out.Payload = &pb.AgenticEvent_ToolPermissionRequired{ToolPermissionRequired: &pb.ToolPermissionRequired{Request: permissionRequestToPB(p.Request)}}
	case presenters.PermissionGrantedPayload:
		out.Payload = &pb.AgenticEvent_ToolPermissionGranted{ToolPermissionGranted: decisionToGranted(presenters.PermissionDecision(p))}
	case presenters.PermissionDeniedPayload:
		out.Payload = &pb.AgenticEvent_ToolPermissionDenied{ToolPermissionDenied: decisionToDenied(presenters.PermissionDecision(p))}
	case presenters.StatusChangedPayload:
		out.Payload = &pb.AgenticEvent_StatusChanged{StatusChanged: &pb.StatusChanged{Status: sessionStatuses[p.Status], Reason: clean(p.Reason)}}
	case presenters.ErrorPayload:
		out.Payload = &pb.AgenticEvent_Error{Error: &pb.ErrorReported{Reason: reasonOf(p.Code), Message: clean(p.Message), MessageId: clean(p.MessageID), Retryable: p.Retryable}}
	case presenters.AgentStatusChangedPayload:
		out.Payload = &pb.AgenticEvent_AgentStatusChanged{AgentStatusChanged: &pb.AgentStatusChanged{Agent: AgentInfoToPB(p.Info)}}
	case presenters.ElicitationRequiredPayload:
		out.Payload = &pb.AgenticEvent_ElicitationRequired{ElicitationRequired: &pb.ElicitationRequired{Request: elicitationRequestToPB(p.Request)}}
	case presenters.ElicitationResolvedPayload:
		out.Payload = &pb.AgenticEvent_ElicitationResolved{ElicitationResolved: ElicitationResolvedToPB(p)}
	case presenters.MessageQueuedPayload:
		out.Payload = &pb.AgenticEvent_MessageQueued{MessageQueued: &pb.MessageQueued{Message: queuedMessageToPB(p.Message)}}
	case presenters.MessageDequeuedPayload:
		out.Payload = &pb.AgenticEvent_MessageDequeued{MessageDequeued: &pb.MessageDequeued{MessageId: clean(p.MessageID),
			UserMessageId: clean(p.UserMessageID), Reason: dequeueReasons[p.Reason], Detail: clean(p.Detail)}}
	case presenters.MessageSteeredPayload:
		out.Payload = &pb.AgenticEvent_MessageSteered{MessageSteered: &pb.MessageSteered{MessageId: clean(p.MessageID), UserMessageId: clean(p.UserMessageID)}}
	}
	return out
}

func queuedMessageToPB(m presenters.QueuedMessage) *pb.QueuedMessage {
	return &pb.QueuedMessage{MessageId: clean(m.MessageID), UserMessageId: clean(m.UserMessageID), Content: contentToPB(m.Content),
		QueueTime: timestamp(m.QueuedAt), Reason: clean(m.Reason), Principal: clean(m.Principal)}
}

// contentToPB is what a client sent, as contentFromPB took it.
func contentToPB(c presenters.MessageContent) *pb.MessageContent {
	out := &pb.MessageContent{Parts: make([]*pb.ContentPart, 0, len(c.Parts))}
	for _, p := range c.Parts {
		part := &pb.ContentPart{}
		switch {
		case p.Image != nil:
			img := &pb.ImageContent{MimeType: clean(p.Image.MimeType)}
			switch p.Image.Kind {
			case presenters.ImageBase64:
				img.Source = &pb.ImageContent_Data{Data: decodeBase64(p.Image.Data)}
			case presenters.ImageFile:
				img.Source = &pb.ImageContent_FilePath{FilePath: clean(p.Image.Data)}
			default:
				img.Source = &pb.ImageContent_Url{Url: clean(p.Image.Data)}
			}
			part.Part = &pb.ContentPart_Image{Image: img}
		case p.File != nil:
			part.Part = &pb.ContentPart_File{File: &pb.FileContent{Path: clean(p.File.Path), Name: clean(p.File.Name), MimeType: clean(p.File.MimeType)}}
		case p.Resource != nil:
			res := &pb.EmbeddedResource{Uri: clean(p.Resource.URI), MimeType: clean(p.Resource.MimeType)}
			if p.Resource.Blob != "" {
				res.Contents = &pb.EmbeddedResource_Blob{Blob: decodeBase64(p.Resource.Blob)}
			} else {
				res.Contents = &pb.EmbeddedResource_Text{Text: clean(p.Resource.Text)}
			}
			part.Part = &pb.ContentPart_Resource{Resource: res}
		default:
			part.Part = &pb.ContentPart_Text{Text: clean(p.Text)}
		}
		out.Parts = append(out.Parts, part)
	}
	return out
}

// decodeBase64 is the bytes of base64 the agents send; what does not decode is sent as
// its own bytes rather than dropped.
func decodeBase64(s string) []byte {
	if s == "" {
		return nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b
	}
	return []byte(s)
}

// reasonOf is the ErrorReason of a domain error code: the value's name in lower case,
// without its prefix ("agent_crashed" is ERROR_REASON_AGENT_CRASHED).
func reasonOf(code string) pb.ErrorReason {
	return pb.ErrorReason(pb.ErrorReason_value["ERROR_REASON_"+strings.ToUpper(code)])
}

// OptionKindFromPB is the domain kind of a wire kind (false for UNSPECIFIED).
func OptionKindFromPB(k pb.PermissionOptionKind) (presenters.PermissionOptionKind, bool) {
	for dk, pk := range optionKinds {
		if pk == k {
			return dk, true
		}
	}
	return "", false
}

// OptionKindToPB is the wire kind of a permission option's kind (UNSPECIFIED if unknown).
func OptionKindToPB(k presenters.PermissionOptionKind) pb.PermissionOptionKind {
	return optionKinds[k]
}

// DeciderToPB is the wire form of who decided a permission (UNSPECIFIED if unknown).
func DeciderToPB(d presenters.PermissionDecider) pb.PermissionDecider { return deciders[d] }

// EventTypes is every domain event type with its wire type, in no particular order.
func EventTypes() iter.Seq2[presenters.EventType, pb.AgenticEventType] {
	return maps.All(eventTypes)
}
