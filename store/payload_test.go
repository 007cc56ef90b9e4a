package store

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// TestFirstReleaseRowsReadUnchanged decodes payloads written the way the first release
// wrote them (the presenters types encoded as they are, raw values in their columns):
// the stored format's fixed keys must read them into the same blocks.
func TestFirstReleaseRowsReadUnchanged(t *testing.T) {
	for i, b := range everyBlock() {
		row := blockRow{MessageID: "m", Position: i, Type: string(b.Type), Text: b.Text}
		var payload any
		switch b.Type {
		case presenters.BlockText, presenters.BlockReasoning:
		case presenters.BlockTool:
			tc := *b.Tool
			row.ToolID, row.ToolName, row.ToolStatus = tc.ToolID, tc.ToolName, string(tc.Status)
			row.RawArguments, row.RawResult = tc.Arguments, tc.Result
			tc.Arguments, tc.Result, tc.Status = nil, nil, ""
			payload = tc
		case presenters.BlockAction:
			a := *b.Action
			if a.Permission != nil {
				p := *a.Permission
				row.RawArguments, p.Arguments = p.Arguments, nil
				a.Permission = &p
			}
			payload = a
		case presenters.BlockError:
			payload = b.Error
		case presenters.BlockImage:
			payload = b.Image
		case presenters.BlockSearch:
			payload = b.Search
		case presenters.BlockMcpUIResource:
			payload = b.McpUIResource
		case presenters.BlockPlan:
			payload = b.Plan
		case presenters.BlockDiff:
			payload = b.Diff
		case presenters.BlockTerminal:
			payload = b.Terminal
		case presenters.BlockResource:
			payload = b.Resource
		default:
			t.Fatalf("block %d: type %s is not covered", i, b.Type)
		}
		if payload != nil {
			data, err := json.Marshal(payload)
			if err != nil {
				t.Fatal(err)
			}
			row.Payload = string(data)
		}
		got, err := decodeBlock(row)
		if err != nil {
			t.Fatalf("block %d (%s): %v", i, b.Type, err)
		}
		if !reflect.DeepEqual(got, b) {
			t.Errorf("block %d (%s) read as\n%+v\nwant\n%+v", i, b.Type, got, b)
		}
	}
}

// TestStoredFormatCoversEveryField fails when a presenters type gains a field that the
// stored format does not keep (it would be lost on the way through SQLite): add it to
// payload.go.
func TestStoredFormatCoversEveryField(t *testing.T) {
	inColumns := map[string]bool{"ToolCall.Status": true, "ToolCall.Arguments": true, "ToolCall.Result": true, "PermissionRequest.Arguments": true}
	pairs := []struct{ domain, stored any }{
		{presenters.ToolCall{}, storedToolCall{}}, {presenters.ToolLocation{}, storedToolLocation{}},
		{presenters.ToolContent{}, storedToolContent{}}, {presenters.CommandInfo{}, storedCommandInfo{}},
		{presenters.DiffBlock{}, storedDiff{}}, {presenters.TerminalBlock{}, storedTerminal{}},
		{presenters.ImageBlock{}, storedImage{}}, {presenters.ResourceBlock{}, storedResource{}},
		{presenters.ErrorBlock{}, storedError{}}, {presenters.ActionBlock{}, storedAction{}},
		{presenters.PermissionRequest{}, storedPermission{}}, {presenters.PermissionOption{}, storedOption{}},
		{presenters.SearchBlock{}, storedSearch{}}, {presenters.SearchResult{}, storedSearchResult{}},
		{presenters.McpUIResourceBlock{}, storedMcpUIResource{}}, {presenters.PlanBlock{}, storedPlan{}},
		{presenters.PlanEntry{}, storedPlanEntry{}}, {presenters.TokenUsage{}, storedUsage{}},
	}
	for _, p := range pairs {
		domain, stored := reflect.TypeOf(p.domain), reflect.TypeOf(p.stored)
		keys := map[string]bool{}
		for f := range stored.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			keys[name] = true
		}
		for f := range domain.Fields() {
			if !keys[f.Name] && !inColumns[domain.Name()+"."+f.Name] {
				t.Errorf("presenters.%s.%s is not in the stored format (%s)", domain.Name(), f.Name, stored.Name())
			}
		}
	}
}
