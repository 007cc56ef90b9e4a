package store

import (
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// The stored payload format (the payload column of blocks). Its JSON keys are fixed
// here rather than taken from the presenters types, so that renaming or adding a field
// there cannot make stored rows unreadable: a field added to presenters is stored once
// it is added here too, and a change of meaning needs a new format and a migration.
// The keys are the Go field names the first release wrote (it encoded the presenters
// types themselves), so rows of that release read unchanged. A tool call's status,
// arguments and result, and a permission request's arguments, live in columns.

type storedToolCall struct {
	ToolID      string               `json:"ToolID"`
	ToolName    string               `json:"ToolName"`
	Title       string               `json:"Title"`
	Kind        string               `json:"Kind"`
	Error       string               `json:"Error"`
	Locations   []storedToolLocation `json:"Locations"`
	Content     []storedToolContent  `json:"Content"`
	CommandInfo *storedCommandInfo   `json:"CommandInfo"`
}

type storedToolLocation struct {
	Path string `json:"Path"`
	Line int    `json:"Line"`
}

type storedToolContent struct {
	Text     string          `json:"Text"`
	Diff     *storedDiff     `json:"Diff"`
	Terminal *storedTerminal `json:"Terminal"`
	Image    *storedImage    `json:"Image"`
	Resource *storedResource `json:"Resource"`
}

type storedCommandInfo struct {
	Command     string `json:"Command"`
	RiskLevel   string `json:"RiskLevel"`
	Reason      string `json:"Reason"`
	Suggestion  string `json:"Suggestion"`
	Signature   string `json:"Signature"`
	BaseCommand string `json:"BaseCommand"`
	Cwd         string `json:"Cwd,omitempty"`
}

type storedDiff struct {
	Path    string `json:"Path"`
	OldText string `json:"OldText"`
	NewText string `json:"NewText"`
}

type storedTerminal struct {
	TerminalID string `json:"TerminalID"`
	Command    string `json:"Command"`
	Output     string `json:"Output"`
	Truncated  bool   `json:"Truncated"`
	ExitCode   *int   `json:"ExitCode"`
	Signal     string `json:"Signal"`
	// OutputOffset is absent (0) in rows written before terminal output had offsets.
	OutputOffset uint64 `json:"OutputOffset"`
}

type storedImage struct {
	MimeType string `json:"MimeType"`
	URL      string `json:"URL"`
	Base64   string `json:"Base64"`
}

type storedResource struct {
	URI      string `json:"URI"`
	Name     string `json:"Name"`
	MimeType string `json:"MimeType"`
	Text     string `json:"Text"`
	Blob     string `json:"Blob"`
}

type storedError struct {
	Message string `json:"Message"`
	Code    string `json:"Code"`
}

type storedAction struct {
	ActionType  string            `json:"ActionType"`
	Description string            `json:"Description"`
	Permission  *storedPermission `json:"Permission"`
}

type storedPermission struct {
	RequestID      string             `json:"RequestID"`
	ToolID         string             `json:"ToolID"`
	ToolName       string             `json:"ToolName"`
	PermissionType string             `json:"PermissionType"`
	Description    string             `json:"Description"`
	CommandInfo    *storedCommandInfo `json:"CommandInfo"`
	Paths          []string           `json:"Paths"`
	Options        []storedOption     `json:"Options"`
	Rememberable   bool               `json:"Rememberable"`
	ServerName     string             `json:"ServerName"`
	MessageID      string             `json:"MessageID"`
	RequestedAt    time.Time          `json:"RequestedAt"`
	Diffs          []storedDiff       `json:"Diffs,omitempty"`
}

type storedOption struct {
	ID   string `json:"ID"`
	Name string `json:"Name"`
	Kind string `json:"Kind"`
}

type storedSearch struct {
	Query   string               `json:"Query"`
	Results []storedSearchResult `json:"Results"`
}

type storedSearchResult struct {
	Title   string `json:"Title"`
	URL     string `json:"URL"`
	Snippet string `json:"Snippet"`
}

type storedMcpUIResource struct {
	URI      string `json:"URI"`
	MimeType string `json:"MimeType"`
	Text     string `json:"Text"`
}

type storedPlan struct {
	Entries []storedPlanEntry `json:"Entries"`
}

type storedPlanEntry struct {
	Content  string `json:"Content"`
	Status   string `json:"Status"`
	Priority string `json:"Priority"`
}

// convert maps a slice, keeping nil as nil.
func convert[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// ptr maps a pointer, keeping nil as nil.
func ptr[T, U any](in *T, f func(T) U) *U {
	if in == nil {
		return nil
	}
	out := f(*in)
	return &out
}

func storeToolCall(t presenters.ToolCall) storedToolCall {
	return storedToolCall{ToolID: t.ToolID, ToolName: t.ToolName, Title: t.Title, Kind: string(t.Kind), Error: t.Error,
		Locations: convert(t.Locations, func(l presenters.ToolLocation) storedToolLocation {
			return storedToolLocation{Path: l.Path, Line: l.Line}
		}),
		Content:     convert(t.Content, storeToolContent),
		CommandInfo: ptr(t.CommandInfo, storeCommandInfo)}
}

func (t storedToolCall) load() presenters.ToolCall {
	return presenters.ToolCall{ToolID: t.ToolID, ToolName: t.ToolName, Title: t.Title, Kind: presenters.ToolKind(t.Kind), Error: t.Error,
		Locations: convert(t.Locations, func(l storedToolLocation) presenters.ToolLocation {
			return presenters.ToolLocation{Path: l.Path, Line: l.Line}
		}),
		Content:     convert(t.Content, storedToolContent.load),
		CommandInfo: ptr(t.CommandInfo, storedCommandInfo.load)}
}

func storeToolContent(c presenters.ToolContent) storedToolContent {
	return storedToolContent{Text: c.Text, Diff: ptr(c.Diff, storeDiff), Terminal: ptr(c.Terminal, storeTerminal),
		Image: ptr(c.Image, storeImage), Resource: ptr(c.Resource, storeResource)}
}

func (c storedToolContent) load() presenters.ToolContent {
	return presenters.ToolContent{Text: c.Text, Diff: ptr(c.Diff, storedDiff.load), Terminal: ptr(c.Terminal, storedTerminal.load),
		Image: ptr(c.Image, storedImage.load), Resource: ptr(c.Resource, storedResource.load)}
}

func storeCommandInfo(c presenters.CommandInfo) storedCommandInfo {
	return storedCommandInfo{Command: c.Command, RiskLevel: string(c.RiskLevel), Reason: c.Reason, Suggestion: c.Suggestion,
		Signature: c.Signature, BaseCommand: c.BaseCommand, Cwd: c.Cwd}
}

func (c storedCommandInfo) load() presenters.CommandInfo {
	return presenters.CommandInfo{Command: c.Command, RiskLevel: presenters.RiskLevel(c.RiskLevel), Reason: c.Reason,
		Suggestion: c.Suggestion, Signature: c.Signature, BaseCommand: c.BaseCommand, Cwd: c.Cwd}
}

func storeDiff(d presenters.DiffBlock) storedDiff {
	return storedDiff{Path: d.Path, OldText: d.OldText, NewText: d.NewText}
}

func (d storedDiff) load() presenters.DiffBlock {
	return presenters.DiffBlock{Path: d.Path, OldText: d.OldText, NewText: d.NewText}
}

func storeTerminal(t presenters.TerminalBlock) storedTerminal {
	return storedTerminal{TerminalID: t.TerminalID, Command: t.Command, Output: t.Output, Truncated: t.Truncated,
		ExitCode: t.ExitCode, Signal: t.Signal, OutputOffset: t.OutputOffset}
}

func (t storedTerminal) load() presenters.TerminalBlock {
	return presenters.TerminalBlock{TerminalID: t.TerminalID, Command: t.Command, Output: t.Output, Truncated: t.Truncated,
		ExitCode: t.ExitCode, Signal: t.Signal, OutputOffset: t.OutputOffset}
}

func storeImage(i presenters.ImageBlock) storedImage {
	return storedImage{MimeType: i.MimeType, URL: i.URL, Base64: i.Base64}
}

func (i storedImage) load() presenters.ImageBlock {
	return presenters.ImageBlock{MimeType: i.MimeType, URL: i.URL, Base64: i.Base64}
}

func storeResource(r presenters.ResourceBlock) storedResource {
	return storedResource{URI: r.URI, Name: r.Name, MimeType: r.MimeType, Text: r.Text, Blob: r.Blob}
}

func (r storedResource) load() presenters.ResourceBlock {
	return presenters.ResourceBlock{URI: r.URI, Name: r.Name, MimeType: r.MimeType, Text: r.Text, Blob: r.Blob}
}

func storeError(e presenters.ErrorBlock) storedError {
	return storedError{Message: e.Message, Code: e.Code}
}

func (e storedError) load() presenters.ErrorBlock {
	code := e.Code
	if renamed, ok := renamedErrorCodes[code]; ok {
		code = renamed
	}
	return presenters.ErrorBlock{Message: e.Message, Code: code}
}

// renamedErrorCodes are error codes earlier releases stored, by the code that now says
// the same.
var renamedErrorCodes = map[string]string{
	"fs_outside_workspace":   "path_outside_workspace",
	"agent_unauthenticated":  "agent_auth_required",
	"provider_misconfigured": "provider_not_found",
	"provider_error":         "agent_error",
	"provider_stream_broken": "provider_unavailable",
	"provider_bad_response":  "provider_unavailable",
	"provider_timeout":       "provider_unavailable",
	"provider_unreachable":   "provider_unavailable",
}

func storeAction(a presenters.ActionBlock) storedAction {
	return storedAction{ActionType: a.ActionType, Description: a.Description, Permission: ptr(a.Permission, storePermission)}
}

func (a storedAction) load() presenters.ActionBlock {
	return presenters.ActionBlock{ActionType: a.ActionType, Description: a.Description, Permission: ptr(a.Permission, storedPermission.load)}
}

func storePermission(p presenters.PermissionRequest) storedPermission {
	return storedPermission{RequestID: p.RequestID, ToolID: p.ToolID, ToolName: p.ToolName, PermissionType: string(p.PermissionType),
		Description: p.Description, CommandInfo: ptr(p.CommandInfo, storeCommandInfo), Paths: p.Paths,
		Options: convert(p.Options, func(o presenters.PermissionOption) storedOption {
			return storedOption{ID: o.ID, Name: o.Name, Kind: string(o.Kind)}
		}),
		Rememberable: p.Rememberable, ServerName: p.ServerName, MessageID: p.MessageID, RequestedAt: p.RequestedAt,
		Diffs: convert(p.Diffs, storeDiff)}
}

func (p storedPermission) load() presenters.PermissionRequest {
	return presenters.PermissionRequest{RequestID: p.RequestID, ToolID: p.ToolID, ToolName: p.ToolName,
		PermissionType: presenters.PermissionType(p.PermissionType), Description: p.Description,
		CommandInfo: ptr(p.CommandInfo, storedCommandInfo.load), Paths: p.Paths,
		Options: convert(p.Options, func(o storedOption) presenters.PermissionOption {
			return presenters.PermissionOption{ID: o.ID, Name: o.Name, Kind: presenters.PermissionOptionKind(o.Kind)}
		}),
		Rememberable: p.Rememberable, ServerName: p.ServerName, MessageID: p.MessageID, RequestedAt: p.RequestedAt,
		Diffs: convert(p.Diffs, storedDiff.load)}
}

func storeSearch(s presenters.SearchBlock) storedSearch {
	return storedSearch{Query: s.Query, Results: convert(s.Results, func(r presenters.SearchResult) storedSearchResult {
		return storedSearchResult{Title: r.Title, URL: r.URL, Snippet: r.Snippet}
	})}
}

func (s storedSearch) load() presenters.SearchBlock {
	return presenters.SearchBlock{Query: s.Query, Results: convert(s.Results, func(r storedSearchResult) presenters.SearchResult {
		return presenters.SearchResult{Title: r.Title, URL: r.URL, Snippet: r.Snippet}
	})}
}

func storeMcpUIResource(r presenters.McpUIResourceBlock) storedMcpUIResource {
	return storedMcpUIResource{URI: r.URI, MimeType: r.MimeType, Text: r.Text}
}

func (r storedMcpUIResource) load() presenters.McpUIResourceBlock {
	return presenters.McpUIResourceBlock{URI: r.URI, MimeType: r.MimeType, Text: r.Text}
}

func storePlan(p presenters.PlanBlock) storedPlan {
	return storedPlan{Entries: convert(p.Entries, func(e presenters.PlanEntry) storedPlanEntry {
		return storedPlanEntry{Content: e.Content, Status: e.Status, Priority: e.Priority}
	})}
}

func (p storedPlan) load() presenters.PlanBlock {
	return presenters.PlanBlock{Entries: convert(p.Entries, func(e storedPlanEntry) presenters.PlanEntry {
		return presenters.PlanEntry{Content: e.Content, Status: e.Status, Priority: e.Priority}
	})}
}
