package transcript

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/agenticd/agenticd/presenters"
)

// blockRow is one row of the blocks table. Text and reasoning live in text; every other
// block type keeps its typed payload as JSON in payload, except the raw tool arguments
// and results, which are stored byte for byte in their own columns (JSON encoding would
// re-format them), and a tool call's status, which has a column so that MarkInterrupted
// can settle unfinished tool calls without decoding payloads.
type blockRow struct {
	MessageID    string
	Position     int
	Type         string
	Text         string
	ToolID       string
	ToolName     string
	ToolStatus   string
	RawArguments []byte
	RawResult    []byte
	Payload      string
}

func encodeBlock(messageID string, position int, b presenters.Block) (blockRow, error) {
	row := blockRow{MessageID: messageID, Position: position, Type: string(b.Type), Text: b.Text}
	var payload any
	switch b.Type {
	case presenters.BlockText, presenters.BlockReasoning:
	case presenters.BlockTool:
		if b.Tool == nil {
			return row, missingPayload(b.Type, position)
		}
		tc := *b.Tool
		row.ToolID, row.ToolName, row.ToolStatus = tc.ToolID, tc.ToolName, string(tc.Status)
		row.RawArguments, row.RawResult = tc.Arguments, tc.Result
		tc.Arguments, tc.Result, tc.Status = nil, nil, ""
		payload = tc
	case presenters.BlockAction:
		if b.Action == nil {
			return row, missingPayload(b.Type, position)
		}
		a := *b.Action
		if a.Permission != nil {
			p := *a.Permission
			row.RawArguments = p.Arguments
			p.Arguments = nil
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
		return row, fmt.Errorf("block %d has unknown type %q: %w", position, b.Type, presenters.ErrInvalidArgument)
	}
	if payload != nil {
		if isNilPointer(payload) {
			return row, missingPayload(b.Type, position)
		}
		data, err := json.Marshal(payload)
		if err != nil {
			return row, fmt.Errorf("block %d (%s): %w: %w", position, b.Type, err, presenters.ErrInvalidArgument)
		}
		row.Payload = string(data)
	}
	return row, nil
}

func missingPayload(t presenters.BlockType, position int) error {
	return fmt.Errorf("block %d has type %q but no %s payload: %w", position, t, t, presenters.ErrInvalidArgument)
}

// isNilPointer reports whether a typed block pointer is nil (the block claims a type
// whose payload is missing).
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

func decodeBlock(row blockRow) (presenters.Block, error) {
	b := presenters.Block{Type: presenters.BlockType(row.Type), Text: row.Text}
	var target any
	switch b.Type {
	case presenters.BlockText, presenters.BlockReasoning:
		return b, nil
	case presenters.BlockTool:
		b.Tool = &presenters.ToolCall{}
		target = b.Tool
	case presenters.BlockAction:
		b.Action = &presenters.ActionBlock{}
		target = b.Action
	case presenters.BlockError:
		b.Error = &presenters.ErrorBlock{}
		target = b.Error
	case presenters.BlockImage:
		b.Image = &presenters.ImageBlock{}
		target = b.Image
	case presenters.BlockSearch:
		b.Search = &presenters.SearchBlock{}
		target = b.Search
	case presenters.BlockMcpUIResource:
		b.McpUIResource = &presenters.McpUIResourceBlock{}
		target = b.McpUIResource
	case presenters.BlockPlan:
		b.Plan = &presenters.PlanBlock{}
		target = b.Plan
	case presenters.BlockDiff:
		b.Diff = &presenters.DiffBlock{}
		target = b.Diff
	case presenters.BlockTerminal:
		b.Terminal = &presenters.TerminalBlock{}
		target = b.Terminal
	case presenters.BlockResource:
		b.Resource = &presenters.ResourceBlock{}
		target = b.Resource
	default:
		return b, fmt.Errorf("stored block %d of message %s has unknown type %q", row.Position, row.MessageID, row.Type)
	}
	if err := json.Unmarshal([]byte(row.Payload), target); err != nil {
		return b, fmt.Errorf("stored block %d of message %s: %w", row.Position, row.MessageID, err)
	}
	switch b.Type {
	case presenters.BlockTool:
		b.Tool.Status = presenters.ToolStatus(row.ToolStatus)
		b.Tool.Arguments = rawOrNil(row.RawArguments)
		b.Tool.Result = rawOrNil(row.RawResult)
	case presenters.BlockAction:
		if b.Action.Permission != nil {
			b.Action.Permission.Arguments = rawOrNil(row.RawArguments)
		}
	}
	return b, nil
}

func rawOrNil(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}
