package events

import (
	"encoding/json"

	"github.com/agenticd/agenticd/presenters"
)

// heldOverhead is what one held event costs besides its text: the Event, its payload and
// the held record, the ring slot, and the framing of its encoded form.
const heldOverhead = 256

// heldSize estimates the memory an event takes while the hub holds it: its text once
// (the payload until a subscriber encodes it, then the encoded form) plus the fixed
// overhead. It counts the fields that can be large; the rest is in the overhead.
func heldSize(p presenters.Payload) int64 {
	var text int
	switch p := p.(type) {
	case presenters.MessageDeltaPayload:
		text = len(p.Text)
	case presenters.MessageBlockPayload:
		text = blockText(&p.Block)
	case presenters.ToolStartPayload:
		text = toolText(&p.Tool)
	case presenters.ToolRunningPayload:
		text = toolText(&p.Tool)
	case presenters.ToolEndPayload:
		text = toolText(&p.Tool)
	case presenters.PermissionRequiredPayload:
		text = len(p.Request.Description) + len(p.Request.Arguments)
	case presenters.ElicitationRequiredPayload:
		text = len(p.Request.Message) + len(p.Request.URL) + jsonSize(p.Request.RequestedSchema)
	case presenters.ElicitationResolvedPayload:
		text = len(p.Reason) + jsonSize(p.Content)
	case presenters.ErrorPayload:
		text = len(p.Message)
	case presenters.MessageQueuedPayload:
		for _, part := range p.Message.Content.Parts {
			text += len(part.Text)
			if part.Image != nil {
				text += len(part.Image.Data)
			}
			if part.Resource != nil {
				text += len(part.Resource.Text) + len(part.Resource.Blob)
			}
		}
	case presenters.MessageDequeuedPayload:
		text = len(p.Detail)
	case presenters.SessionClosedPayload:
		text = len(p.Reason)
	case presenters.StatusChangedPayload:
		text = len(p.Reason)
	}
	return heldOverhead + int64(text)
}

func blockText(b *presenters.Block) int {
	n := len(b.Text)
	if b.Tool != nil {
		n += toolText(b.Tool)
	}
	if b.Error != nil {
		n += len(b.Error.Message)
	}
	if b.Action != nil {
		n += len(b.Action.Description)
	}
	if b.Search != nil {
		for _, r := range b.Search.Results {
			n += len(r.Title) + len(r.URL) + len(r.Snippet)
		}
	}
	if b.McpUIResource != nil {
		n += len(b.McpUIResource.Text)
	}
	if b.Plan != nil {
		for _, e := range b.Plan.Entries {
			n += len(e.Content)
		}
	}
	return n + contentText(b.Diff, b.Terminal, b.Image, b.Resource)
}

func toolText(t *presenters.ToolCall) int {
	n := len(t.Arguments) + len(t.Result) + len(t.Error)
	for i := range t.Content {
		c := &t.Content[i]
		n += len(c.Text) + contentText(c.Diff, c.Terminal, c.Image, c.Resource)
	}
	return n
}

func contentText(d *presenters.DiffBlock, t *presenters.TerminalBlock, i *presenters.ImageBlock, r *presenters.ResourceBlock) int {
	n := 0
	if d != nil {
		n += len(d.OldText) + len(d.NewText)
	}
	if t != nil {
		n += len(t.Output)
	}
	if i != nil {
		n += len(i.Base64) + len(i.URL)
	}
	if r != nil {
		n += len(r.Text) + len(r.Blob)
	}
	return n
}

// jsonSize is the encoded size of decoded JSON (an elicitation's schema or content,
// small and rare, so measuring beats guessing).
func jsonSize(m map[string]any) int {
	if m == nil {
		return 0
	}
	b, err := json.Marshal(m)
	if err != nil {
		return 0
	}
	return len(b)
}
