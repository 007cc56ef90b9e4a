package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agenticd/agenticd/presenters"
)

// blockRow is one block as stored in the blocks table, with its whole text (the table
// holds long texts in parts: textparts.go). Text and reasoning live in text; every other
// block type keeps its typed payload as JSON in payload (format: payload.go), except the raw tool arguments
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

// sameExceptText reports whether two rows store the same block but maybe for its text
// (which is compared part by part: planBlockWrites).
func (r blockRow) sameExceptText(o blockRow) bool {
	return r.MessageID == o.MessageID && r.Position == o.Position && r.Type == o.Type &&
		r.ToolID == o.ToolID && r.ToolName == o.ToolName && r.ToolStatus == o.ToolStatus &&
		bytes.Equal(r.RawArguments, o.RawArguments) && bytes.Equal(r.RawResult, o.RawResult) && r.Payload == o.Payload
}

// encodeBlock makes a block's row. Text columns are made valid UTF-8 (JSON payloads
// already are): what is read back is sent to clients, and protobuf refuses invalid
// UTF-8, so one bad byte stored would fail every read of the message.
func encodeBlock(messageID string, position int, b presenters.Block) (blockRow, error) {
	row := blockRow{MessageID: messageID, Position: position, Type: string(b.Type), Text: validUTF8(b.Text)}
	var payload any
	missing := false
	switch b.Type {
	case presenters.BlockText, presenters.BlockReasoning:
	case presenters.BlockTool:
		if missing = b.Tool == nil; !missing {
			tc := *b.Tool
			row.ToolID, row.ToolName, row.ToolStatus = validUTF8(tc.ToolID), validUTF8(tc.ToolName), string(tc.Status)
			row.RawArguments, row.RawResult = tc.Arguments, tc.Result
			payload = storeToolCall(tc)
		}
	case presenters.BlockAction:
		if missing = b.Action == nil; !missing {
			if b.Action.Permission != nil {
				row.RawArguments = b.Action.Permission.Arguments
			}
			payload = storeAction(*b.Action)
		}
	case presenters.BlockError:
		if missing = b.Error == nil; !missing {
			payload = storeError(*b.Error)
		}
	case presenters.BlockImage:
		if missing = b.Image == nil; !missing {
			payload = storeImage(*b.Image)
		}
	case presenters.BlockSearch:
		if missing = b.Search == nil; !missing {
			payload = storeSearch(*b.Search)
		}
	case presenters.BlockMcpUIResource:
		if missing = b.McpUIResource == nil; !missing {
			payload = storeMcpUIResource(*b.McpUIResource)
		}
	case presenters.BlockPlan:
		if missing = b.Plan == nil; !missing {
			payload = storePlan(*b.Plan)
		}
	case presenters.BlockDiff:
		if missing = b.Diff == nil; !missing {
			payload = storeDiff(*b.Diff)
		}
	case presenters.BlockTerminal:
		if missing = b.Terminal == nil; !missing {
			payload = storeTerminal(*b.Terminal)
		}
	case presenters.BlockResource:
		if missing = b.Resource == nil; !missing {
			payload = storeResource(*b.Resource)
		}
	default:
		return row, fmt.Errorf("block %d has unknown type %q: %w", position, b.Type, presenters.ErrInvalidArgument)
	}
	if missing {
		return row, fmt.Errorf("block %d has type %q but no %s payload: %w", position, b.Type, b.Type, presenters.ErrInvalidArgument)
	}
	if payload != nil {
		data, err := json.Marshal(payload)
		if err != nil {
			return row, fmt.Errorf("block %d (%s): %w: %w", position, b.Type, err, presenters.ErrInvalidArgument)
		}
		row.Payload = string(data)
	}
	return row, nil
}

func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// loadPayload decodes a stored payload of format S into the presenters type P.
func loadPayload[S interface{ load() P }, P any](row blockRow) (*P, error) {
	var stored S
	if err := json.Unmarshal([]byte(row.Payload), &stored); err != nil {
		return nil, fmt.Errorf("stored block %d of message %s: %w", row.Position, row.MessageID, err)
	}
	p := stored.load()
	return &p, nil
}

func decodeBlock(row blockRow) (presenters.Block, error) {
	b := presenters.Block{Type: presenters.BlockType(row.Type), Text: row.Text}
	var err error
	switch b.Type {
	case presenters.BlockText, presenters.BlockReasoning:
	case presenters.BlockTool:
		if b.Tool, err = loadPayload[storedToolCall](row); err == nil {
			b.Tool.Status = presenters.ToolStatus(row.ToolStatus)
			b.Tool.Arguments = rawOrNil(row.RawArguments)
			b.Tool.Result = rawOrNil(row.RawResult)
		}
	case presenters.BlockAction:
		if b.Action, err = loadPayload[storedAction](row); err == nil && b.Action.Permission != nil {
			b.Action.Permission.Arguments = rawOrNil(row.RawArguments)
		}
	case presenters.BlockError:
		b.Error, err = loadPayload[storedError](row)
	case presenters.BlockImage:
		b.Image, err = loadPayload[storedImage](row)
	case presenters.BlockSearch:
		b.Search, err = loadPayload[storedSearch](row)
	case presenters.BlockMcpUIResource:
		b.McpUIResource, err = loadPayload[storedMcpUIResource](row)
	case presenters.BlockPlan:
		b.Plan, err = loadPayload[storedPlan](row)
	case presenters.BlockDiff:
		b.Diff, err = loadPayload[storedDiff](row)
	case presenters.BlockTerminal:
		b.Terminal, err = loadPayload[storedTerminal](row)
	case presenters.BlockResource:
		b.Resource, err = loadPayload[storedResource](row)
	default:
		return b, fmt.Errorf("stored block %d of message %s has unknown type %q", row.Position, row.MessageID, row.Type)
	}
	return b, err
}

func rawOrNil(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}
