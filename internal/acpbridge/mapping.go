package acpbridge

import (
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// enumName is an enum value's name as ACP spells it: TOOL_KIND_SWITCH_MODE -> switch_mode.
func enumName(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

func toolKind(k pb.ToolKind) acp.ToolKind {
	if k == pb.ToolKind_TOOL_KIND_UNSPECIFIED {
		return acp.ToolKindOther
	}
	return acp.ToolKind(enumName(k.String(), "TOOL_KIND_"))
}

// toolStatus maps a tool's status; ACP has no "cancelled" tool status, so a cancelled
// tool call shows as failed, as agents report it.
func toolStatus(s pb.ToolStatus) acp.ToolCallStatus {
	switch s {
	case pb.ToolStatus_TOOL_STATUS_IN_PROGRESS:
		return acp.ToolCallStatusInProgress
	case pb.ToolStatus_TOOL_STATUS_COMPLETED:
		return acp.ToolCallStatusCompleted
	case pb.ToolStatus_TOOL_STATUS_FAILED, pb.ToolStatus_TOOL_STATUS_CANCELLED:
		return acp.ToolCallStatusFailed
	}
	return acp.ToolCallStatusPending
}

func stopReason(r pb.StopReason) acp.StopReason {
	switch r {
	case pb.StopReason_STOP_REASON_MAX_TOKENS:
		return acp.StopReasonMaxTokens
	case pb.StopReason_STOP_REASON_MAX_TURN_REQUESTS:
		return acp.StopReasonMaxTurnRequests
	case pb.StopReason_STOP_REASON_REFUSAL:
		return acp.StopReasonRefusal
	case pb.StopReason_STOP_REASON_CANCELLED:
		return acp.StopReasonCancelled
	}
	return acp.StopReasonEndTurn
}

func optionKind(k pb.PermissionOptionKind) acp.PermissionOptionKind {
	if k == pb.PermissionOptionKind_PERMISSION_OPTION_KIND_UNSPECIFIED {
		return acp.PermissionOptionKindRejectOnce
	}
	return acp.PermissionOptionKind(enumName(k.String(), "PERMISSION_OPTION_KIND_"))
}

func textBlock(text string) acp.ContentBlock { return acp.TextBlock(text) }

func imageBlock(img *pb.ImageBlock) acp.ContentBlock {
	c := &acp.ContentBlockImage{Type: "image", MimeType: img.GetMimeType(), Data: base64.StdEncoding.EncodeToString(img.GetData())}
	if u := img.GetUrl(); u != "" {
		c.Uri = &u
	}
	return acp.ContentBlock{Image: c}
}

func resourceBlock(r *pb.ResourceBlock) acp.ContentBlock {
	var mime *string
	if r.GetMimeType() != "" {
		mime = new(r.GetMimeType())
	}
	switch {
	case r.GetText() != "":
		return acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{Uri: r.GetUri(), Text: r.GetText(), MimeType: mime}})
	case len(r.GetBlob()) > 0:
		return acp.ResourceBlock(acp.EmbeddedResourceResource{BlobResourceContents: &acp.BlobResourceContents{Uri: r.GetUri(), Blob: base64.StdEncoding.EncodeToString(r.GetBlob()), MimeType: mime}})
	}
	name := cmpOr(r.GetName(), r.GetUri())
	return acp.ContentBlock{ResourceLink: &acp.ContentBlockResourceLink{Type: "resource_link", Uri: r.GetUri(), Name: name, MimeType: mime}}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// messageChunk is a chunk of a message by role: the user's, or the agent's.
func messageChunk(role pb.MessageRole, messageID string, c acp.ContentBlock) acp.SessionUpdate {
	if role == pb.MessageRole_MESSAGE_ROLE_USER {
		return acp.SessionUpdate{UserMessageChunk: &acp.SessionUpdateUserMessageChunk{Content: c, MessageId: &messageID}}
	}
	return acp.SessionUpdate{AgentMessageChunk: &acp.SessionUpdateAgentMessageChunk{Content: c, MessageId: &messageID}}
}

func planUpdate(p *pb.PlanBlock) acp.SessionUpdate {
	entries := make([]acp.PlanEntry, 0, len(p.GetEntries()))
	for _, e := range p.GetEntries() {
		status := acp.PlanEntryStatusPending
		if e.GetStatus() != pb.PlanEntryStatus_PLAN_ENTRY_STATUS_UNSPECIFIED {
			status = acp.PlanEntryStatus(enumName(e.GetStatus().String(), "PLAN_ENTRY_STATUS_"))
		}
		prio := acp.PlanEntryPriorityMedium
		if e.GetPriority() != pb.PlanEntryPriority_PLAN_ENTRY_PRIORITY_UNSPECIFIED {
			prio = acp.PlanEntryPriority(enumName(e.GetPriority().String(), "PLAN_ENTRY_PRIORITY_"))
		}
		entries = append(entries, acp.PlanEntry{Content: e.GetContent(), Status: status, Priority: prio})
	}
	return acp.SessionUpdate{Plan: &acp.SessionUpdatePlan{Entries: entries}}
}

// blockUpdates is what one block of a message shows as, by the message's role. Blocks
// with no ACP update of their own (actions, searches, UI resources) show nothing: the
// agent that made them sent them as something else, or agenticd added them.
func blockUpdates(role pb.MessageRole, messageID string, b *pb.Block, terms terminals) []acp.SessionUpdate {
	switch c := b.GetContent().(type) {
	case *pb.Block_Text:
		return []acp.SessionUpdate{messageChunk(role, messageID, textBlock(c.Text.GetText()))}
	case *pb.Block_Reasoning:
		return []acp.SessionUpdate{{AgentThoughtChunk: &acp.SessionUpdateAgentThoughtChunk{Content: textBlock(c.Reasoning.GetText()), MessageId: &messageID}}}
	case *pb.Block_Plan:
		return []acp.SessionUpdate{planUpdate(c.Plan)}
	case *pb.Block_Image:
		return []acp.SessionUpdate{messageChunk(role, messageID, imageBlock(c.Image))}
	case *pb.Block_Resource:
		return []acp.SessionUpdate{messageChunk(role, messageID, resourceBlock(c.Resource))}
	case *pb.Block_Error:
		return []acp.SessionUpdate{messageChunk(role, messageID, textBlock("\n\nError: "+c.Error.GetMessage()+"\n"))}
	case *pb.Block_Tool:
		return []acp.SessionUpdate{toolStart(c.Tool, terms)}
	}
	return nil
}

// terminals keeps each shown terminal's output, since TOOL_RUNNING carries only what is
// new while ACP's tool content replaces the whole. The editor gets the output as text:
// the terminal lives in agenticd, where the editor cannot reach it by id.
type terminals map[string]termOutput // tool id + terminal id -> output held

// termOutput is a terminal's output from byte start of all it printed.
type termOutput struct {
	start uint64
	text  string
}

// merge keeps what is held before the block's offset and appends its output.
func (t terminals) merge(toolID string, term *pb.TerminalBlock) string {
	key := toolID + "\x00" + term.GetTerminalId()
	held, off := t[key], term.GetOutputOffset()
	if off < held.start || off > held.start+uint64(len(held.text)) {
		held = termOutput{start: off, text: term.GetOutput()}
	} else {
		held.text = held.text[:off-held.start] + term.GetOutput()
	}
	t[key] = held
	return held.text
}

func (t terminals) forget(toolID string) {
	for k := range t {
		if strings.HasPrefix(k, toolID+"\x00") {
			delete(t, k)
		}
	}
}

func toolContent(toolID string, content []*pb.ToolContent, terms terminals) []acp.ToolCallContent {
	out := make([]acp.ToolCallContent, 0, len(content))
	for _, c := range content {
		switch v := c.GetContent().(type) {
		case *pb.ToolContent_Text:
			out = append(out, acp.ToolContent(textBlock(v.Text)))
		case *pb.ToolContent_Diff:
			if v.Diff.GetOldText() == "" {
				out = append(out, acp.ToolDiffContent(v.Diff.GetPath(), v.Diff.GetNewText()))
			} else {
				out = append(out, acp.ToolDiffContent(v.Diff.GetPath(), v.Diff.GetNewText(), v.Diff.GetOldText()))
			}
		case *pb.ToolContent_Terminal:
			output := v.Terminal.GetOutput()
			if terms != nil {
				output = terms.merge(toolID, v.Terminal)
			}
			text := "$ " + v.Terminal.GetCommand() + "\n" + output
			if v.Terminal.ExitCode != nil {
				text += "\n[exit " + strconv.Itoa(int(v.Terminal.GetExitCode())) + "]"
			}
			out = append(out, acp.ToolContent(textBlock(text)))
		case *pb.ToolContent_Image:
			out = append(out, acp.ToolContent(imageBlock(v.Image)))
		case *pb.ToolContent_Resource:
			out = append(out, acp.ToolContent(resourceBlock(v.Resource)))
		}
	}
	return out
}

func locations(ls []*pb.ToolLocation) []acp.ToolCallLocation {
	out := make([]acp.ToolCallLocation, 0, len(ls))
	for _, l := range ls {
		loc := acp.ToolCallLocation{Path: l.GetPath()}
		if l.GetLine() > 0 {
			loc.Line = new(int(l.GetLine()))
		}
		out = append(out, loc)
	}
	return out
}

func rawValue(v *structpb.Value) any {
	if v == nil {
		return nil
	}
	return v.AsInterface()
}

func toolTitle(t *pb.ToolCall) string { return cmpOr(t.GetTitle(), t.GetToolName()) }

// toolStart is a tool call as ACP announces one, with its whole state.
func toolStart(t *pb.ToolCall, terms terminals) acp.SessionUpdate {
	return acp.SessionUpdate{ToolCall: &acp.SessionUpdateToolCall{
		ToolCallId: acp.ToolCallId(t.GetToolId()),
		Title:      toolTitle(t),
		Kind:       toolKind(t.GetKind()),
		Status:     toolStatus(t.GetStatus()),
		Content:    toolContent(t.GetToolId(), t.GetContent(), terms),
		Locations:  locations(t.GetLocations()),
		RawInput:   rawValue(t.GetArguments()),
		RawOutput:  rawValue(t.GetResult()),
	}}
}

// toolCallUpdate is a tool call's current state as an ACP update (every field set: the
// event carries the whole state).
func toolCallUpdate(t *pb.ToolCall, terms terminals) acp.ToolCallUpdate {
	u := acp.ToolCallUpdate{
		ToolCallId: acp.ToolCallId(t.GetToolId()),
		Kind:       new(toolKind(t.GetKind())),
		Status:     new(toolStatus(t.GetStatus())),
		Content:    toolContent(t.GetToolId(), t.GetContent(), terms),
		Locations:  locations(t.GetLocations()),
		RawInput:   rawValue(t.GetArguments()),
		RawOutput:  rawValue(t.GetResult()),
	}
	if title := toolTitle(t); title != "" {
		u.Title = &title
	}
	if t.GetError() != "" && len(u.Content) == 0 {
		u.Content = []acp.ToolCallContent{acp.ToolContent(textBlock(t.GetError()))}
	}
	return u
}

func toolUpdate(t *pb.ToolCall, terms terminals) acp.SessionUpdate {
	u := toolCallUpdate(t, terms)
	return acp.SessionUpdate{ToolCallUpdate: &acp.SessionToolCallUpdate{
		ToolCallId: u.ToolCallId, Kind: u.Kind, Status: u.Status, Content: u.Content,
		Locations: u.Locations, RawInput: u.RawInput, RawOutput: u.RawOutput, Title: u.Title,
	}}
}

func commands(cs []*pb.Command) acp.SessionUpdate {
	out := make([]acp.AvailableCommand, 0, len(cs))
	for _, c := range cs {
		cmd := acp.AvailableCommand{Name: c.GetName(), Description: c.GetDescription()}
		if c.GetInputHint() != "" {
			cmd.Input = &acp.AvailableCommandInput{Unstructured: &acp.UnstructuredCommandInput{Hint: c.GetInputHint()}}
		}
		out = append(out, cmd)
	}
	return acp.SessionUpdate{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{AvailableCommands: out}}
}

// usageUpdate is the session's context window and cost; nil when the agent reported
// neither (ACP's usage_update needs the window).
func usageUpdate(u *pb.TokenUsage) *acp.SessionUpdate {
	if u == nil || (u.ContextSize == nil && u.ContextUsed == nil && u.Cost == nil) {
		return nil
	}
	up := &acp.SessionUsageUpdate{Used: int(u.GetContextUsed()), Size: int(u.GetContextSize())}
	if u.Cost != nil {
		up.Cost = &acp.Cost{Amount: u.GetCost(), Currency: cmpOr(u.GetCostCurrency(), "USD")}
	}
	return &acp.SessionUpdate{UsageUpdate: up}
}

// turnUsage is a turn's token counts as the prompt's answer carries them.
func turnUsage(u *pb.TokenUsage) *acp.Usage {
	if u == nil || (u.InputTokens == nil && u.OutputTokens == nil && u.TotalTokens == nil) {
		return nil
	}
	out := &acp.Usage{InputTokens: int(u.GetInputTokens()), OutputTokens: int(u.GetOutputTokens()), TotalTokens: int(u.GetTotalTokens())}
	if u.CachedInputTokens != nil {
		out.CachedReadTokens = new(int(u.GetCachedInputTokens()))
	}
	if u.ReasoningTokens != nil {
		out.ThoughtTokens = new(int(u.GetReasoningTokens()))
	}
	return out
}

func modeState(s *pb.SessionInfo) *acp.SessionModeState {
	if len(s.GetAvailableModes()) == 0 {
		return nil
	}
	st := &acp.SessionModeState{CurrentModeId: acp.SessionModeId(s.GetCurrentModeId())}
	for _, m := range s.GetAvailableModes() {
		mode := acp.SessionMode{Id: acp.SessionModeId(m.GetId()), Name: cmpOr(m.GetName(), m.GetId())}
		if m.GetDescription() != "" {
			mode.Description = new(m.GetDescription())
		}
		st.AvailableModes = append(st.AvailableModes, mode)
	}
	return st
}

// The config options agenticd offers an editor: the session's mode and model under these
// ids (SetMode, SetModel, whichever way the agent offers them), and the agent's other
// config options under their own ids (SetConfigOption).
const (
	configMode  = "mode"
	configModel = "model"
)

func selectOption(id, name string, cat acp.SessionConfigOptionCategory, current string, opts []acp.SessionConfigSelectOption) acp.SessionConfigOption {
	ungrouped := acp.SessionConfigSelectOptionsUngrouped(opts)
	return acp.SessionConfigOption{Select: &acp.SessionConfigOptionSelect{
		Type: "select", Id: acp.SessionConfigId(id), Name: name, Category: &cat,
		CurrentValue: acp.SessionConfigValueId(current), Options: acp.SessionConfigSelectOptions{Ungrouped: &ungrouped},
	}}
}

func configOptions(s *pb.SessionInfo) []acp.SessionConfigOption {
	var out []acp.SessionConfigOption
	if ms := s.GetAvailableModes(); len(ms) > 0 {
		opts := make([]acp.SessionConfigSelectOption, 0, len(ms))
		for _, m := range ms {
			opts = append(opts, acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(m.GetId()), Name: cmpOr(m.GetName(), m.GetId())})
		}
		out = append(out, selectOption(configMode, "Mode", acp.SessionConfigOptionCategoryMode, s.GetCurrentModeId(), opts))
	}
	if ms := s.GetAvailableModels(); len(ms) > 0 {
		opts := make([]acp.SessionConfigSelectOption, 0, len(ms))
		for _, m := range ms {
			opts = append(opts, acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(m.GetId()), Name: cmpOr(m.GetName(), m.GetId())})
		}
		out = append(out, selectOption(configModel, "Model", acp.SessionConfigOptionCategoryModel, s.GetCurrentModelId(), opts))
	}
	for _, o := range s.GetConfigOptions() {
		// The agent's mode and model options are the two above already.
		if o.GetCategory() == configMode || o.GetCategory() == configModel || o.GetId() == configMode || o.GetId() == configModel {
			continue
		}
		out = append(out, agentOption(o))
	}
	return out
}

// agentOption is one of the agent's own config options, as the agent offered it.
func agentOption(o *pb.ConfigOption) acp.SessionConfigOption {
	var cat *acp.SessionConfigOptionCategory
	if o.GetCategory() != "" {
		cat = new(acp.SessionConfigOptionCategory(o.GetCategory()))
	}
	var desc *string
	if o.GetDescription() != "" {
		desc = new(o.GetDescription())
	}
	name := cmpOr(o.GetName(), o.GetId())
	if o.GetType() == pb.ConfigOptionType_CONFIG_OPTION_TYPE_BOOLEAN {
		return acp.SessionConfigOption{Boolean: &acp.SessionConfigOptionBoolean{
			Type: "boolean", Id: acp.SessionConfigId(o.GetId()), Name: name, Description: desc, Category: cat,
			CurrentValue: o.GetCurrentValue() == "true",
		}}
	}
	choice := func(c *pb.ConfigChoice) acp.SessionConfigSelectOption {
		opt := acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(c.GetValue()), Name: cmpOr(c.GetName(), c.GetValue())}
		if c.GetDescription() != "" {
			opt.Description = new(c.GetDescription())
		}
		return opt
	}
	var options acp.SessionConfigSelectOptions
	if slices.ContainsFunc(o.GetChoices(), func(c *pb.ConfigChoice) bool { return c.GetGroup() != "" }) {
		var groups acp.SessionConfigSelectOptionsGrouped
		index := map[string]int{}
		for _, c := range o.GetChoices() {
			i, ok := index[c.GetGroup()]
			if !ok {
				i = len(groups)
				index[c.GetGroup()] = i
				groups = append(groups, acp.SessionConfigSelectGroup{Group: acp.SessionConfigGroupId(c.GetGroup()), Name: c.GetGroup()})
			}
			groups[i].Options = append(groups[i].Options, choice(c))
		}
		options.Grouped = &groups
	} else {
		ungrouped := make(acp.SessionConfigSelectOptionsUngrouped, 0, len(o.GetChoices()))
		for _, c := range o.GetChoices() {
			ungrouped = append(ungrouped, choice(c))
		}
		options.Ungrouped = &ungrouped
	}
	return acp.SessionConfigOption{Select: &acp.SessionConfigOptionSelect{
		Type: "select", Id: acp.SessionConfigId(o.GetId()), Name: name, Description: desc, Category: cat,
		CurrentValue: acp.SessionConfigValueId(o.GetCurrentValue()), Options: options,
	}}
}

// promptContent is an editor's prompt as agenticd's message content.
func promptContent(blocks []acp.ContentBlock) *pb.MessageContent {
	mc := &pb.MessageContent{}
	add := func(p *pb.ContentPart) { mc.Parts = append(mc.Parts, p) }
	for _, b := range blocks {
		switch {
		case b.Text != nil:
			if b.Text.Text != "" {
				add(&pb.ContentPart{Part: &pb.ContentPart_Text{Text: b.Text.Text}})
			}
		case b.Image != nil:
			img := &pb.ImageContent{MimeType: b.Image.MimeType}
			if data, err := base64.StdEncoding.DecodeString(b.Image.Data); err == nil && len(data) > 0 {
				img.Source = &pb.ImageContent_Data{Data: data}
			} else if b.Image.Uri != nil {
				img.Source = &pb.ImageContent_Url{Url: *b.Image.Uri}
			}
			add(&pb.ContentPart{Part: &pb.ContentPart_Image{Image: img}})
		case b.ResourceLink != nil:
			add(&pb.ContentPart{Part: &pb.ContentPart_File{File: &pb.FileContent{
				Path: strings.TrimPrefix(b.ResourceLink.Uri, "file://"), Name: b.ResourceLink.Name, MimeType: deref(b.ResourceLink.MimeType)}}})
		case b.Resource != nil:
			r := &pb.EmbeddedResource{}
			switch res := b.Resource.Resource; {
			case res.TextResourceContents != nil:
				r.Uri, r.MimeType = res.TextResourceContents.Uri, deref(res.TextResourceContents.MimeType)
				r.Contents = &pb.EmbeddedResource_Text{Text: res.TextResourceContents.Text}
			case res.BlobResourceContents != nil:
				r.Uri, r.MimeType = res.BlobResourceContents.Uri, deref(res.BlobResourceContents.MimeType)
				blob, _ := base64.StdEncoding.DecodeString(res.BlobResourceContents.Blob)
				r.Contents = &pb.EmbeddedResource_Blob{Blob: blob}
			}
			add(&pb.ContentPart{Part: &pb.ContentPart_Resource{Resource: r}})
		case b.Audio != nil:
			// agenticd's messages carry no audio; initialize does not offer it.
		}
	}
	return mc
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func rfc3339(ts interface{ AsTime() time.Time }) *string {
	return new(ts.AsTime().UTC().Format(time.RFC3339))
}
