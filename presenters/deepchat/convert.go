package deepchat

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"path/filepath"
	"strings"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

const (
	// maxImageBytes bounds an image file attached by path.
	maxImageBytes = 20 << 20
	// maxAttachedText bounds the text of an attached file that is stored and sent.
	maxAttachedText = 256 << 10
)

func systemPrompt(workspace string) string {
	return "You are DeepChat, a coding assistant running inside agenticd. You work in the workspace directory " + workspace +
		". Tool paths are relative to it; absolute paths must stay inside it. Use the tools to read, search and change files " +
		"and to run commands. A tool call may need the user's permission and may be refused: then continue without it. " +
		"Be concise and say what you changed."
}

// userBlocks turns what the user sent into the blocks stored for the user's message,
// one per part, in order: the model is sent them in that order. Attached files are read
// now, so the history keeps what was sent. Errors name the part as content.parts[i].
func userBlocks(ws *sandbox.Workspace, c presenters.MessageContent) ([]presenters.Block, error) {
	blocks := make([]presenters.Block, 0, len(c.Parts))
	for i, part := range c.Parts {
		b, err := userBlock(ws, part)
		if err != nil {
			return nil, fmt.Errorf("content.parts[%d]: %w", i, err)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

func userBlock(ws *sandbox.Workspace, part presenters.ContentPart) (presenters.Block, error) {
	switch {
	case part.Image != nil:
		b, err := imageBlock(ws, *part.Image)
		return presenters.Block{Type: presenters.BlockImage, Image: b}, err
	case part.File != nil:
		b, err := fileBlock(ws, *part.File)
		return presenters.Block{Type: presenters.BlockResource, Resource: b}, err
	case part.Resource != nil:
		res := part.Resource
		if res.URI == "" {
			return presenters.Block{}, fmt.Errorf("the resource's uri is required: %w", presenters.ErrInvalidArgument)
		}
		return presenters.Block{Type: presenters.BlockResource, Resource: &presenters.ResourceBlock{
			URI: res.URI, MimeType: res.MimeType, Text: res.Text, Blob: res.Blob}}, nil
	case part.Text != "":
		return presenters.Block{Type: presenters.BlockText, Text: part.Text}, nil
	}
	return presenters.Block{}, fmt.Errorf("the part is empty; set its text, image, file or resource: %w", presenters.ErrInvalidArgument)
}

func imageBlock(ws *sandbox.Workspace, img presenters.Image) (*presenters.ImageBlock, error) {
	b := &presenters.ImageBlock{MimeType: img.MimeType}
	switch img.Kind {
	case presenters.ImageURL:
		if !strings.HasPrefix(img.Data, "http://") && !strings.HasPrefix(img.Data, "https://") && !strings.HasPrefix(img.Data, "data:") {
			return nil, fmt.Errorf("the image url must be http(s) or a data: URL: %w", presenters.ErrInvalidArgument)
		}
		b.URL = img.Data
	case presenters.ImageBase64:
		if img.MimeType == "" {
			return nil, fmt.Errorf("image data needs a mime_type: %w", presenters.ErrInvalidArgument)
		}
		if _, err := base64.StdEncoding.DecodeString(img.Data); err != nil {
			return nil, fmt.Errorf("the image data is not valid base64: %w", presenters.ErrInvalidArgument)
		}
		b.Base64 = img.Data
	case presenters.ImageFile:
		abs, err := ws.Resolve(img.Data)
		if err != nil {
			return nil, fmt.Errorf("image %s: %v: %w", img.Data, err, presenters.ErrInvalidArgument)
		}
		data, err := ws.ReadFile(img.Data, maxImageBytes)
		if err != nil {
			return nil, fmt.Errorf("image %s: %v: %w", img.Data, err, presenters.ErrInvalidArgument)
		}
		if b.MimeType == "" {
			b.MimeType = mime.TypeByExtension(filepath.Ext(img.Data))
		}
		if !strings.HasPrefix(b.MimeType, "image/") {
			return nil, fmt.Errorf("image %s is not a known image type; give mime_type: %w", img.Data, presenters.ErrInvalidArgument)
		}
		// Stored with both: the model is sent the data, clients see the file's URL
		// when the data is too large to show inline (presentBlocks).
		b.URL, b.Base64 = "file://"+abs, base64.StdEncoding.EncodeToString(data)
	default:
		return nil, fmt.Errorf("unknown image source kind %q: %w", img.Kind, presenters.ErrInvalidArgument)
	}
	return b, nil
}

func fileBlock(ws *sandbox.Workspace, f presenters.File) (*presenters.ResourceBlock, error) {
	abs, err := ws.Resolve(f.Path)
	if err != nil {
		return nil, fmt.Errorf("file %s: %v: %w", f.Path, err, presenters.ErrInvalidArgument)
	}
	name := f.Name
	if name == "" {
		name = filepath.Base(abs)
	}
	rb := &presenters.ResourceBlock{URI: "file://" + abs, Name: name, MimeType: f.MimeType}
	text, err := ws.ReadTextFile(f.Path, sandbox.ReadOptions{})
	switch {
	case err == nil:
		if len(text) > maxAttachedText {
			return nil, fmt.Errorf("file %s is larger than %d KiB; attach a smaller file or let the agent read it with its tools: %w",
				f.Path, maxAttachedText>>10, presenters.ErrInvalidArgument)
		}
		rb.Text = text
	case errors.Is(err, sandbox.ErrNotText), errors.Is(err, sandbox.ErrTooLarge):
		// A binary or huge file travels as a link; the model is told it is not shown.
	default:
		return nil, fmt.Errorf("file %s: %v: %w", f.Path, err, presenters.ErrInvalidArgument)
	}
	return rb, nil
}

// chatHistory turns stored messages into chat messages, skipping the message with id
// skip (the reply being produced). An assistant message is split at each text that
// follows tool calls, so every tool call is followed by its result as the API requires.
func chatHistory(msgs []presenters.Message, skip string) []chatMessage {
	var out []chatMessage
	for _, m := range msgs {
		if m.ID == skip {
			continue
		}
		switch m.Role {
		case presenters.RoleUser:
			if content := userContent(m.Blocks); content != nil {
				out = append(out, chatMessage{Role: "user", Content: content})
			}
		case presenters.RoleSystem:
			if text := joinText(m.Blocks); text != "" {
				out = append(out, chatMessage{Role: "system", Content: text})
			}
		case presenters.RoleAssistant:
			out = append(out, assistantMessages(m.Blocks)...)
		}
	}
	return out
}

func joinText(blocks []presenters.Block) string {
	var sb strings.Builder
	for _, b := range blocks {
		if b.Type == presenters.BlockText {
			sb.WriteString(b.Text)
		}
	}
	return sb.String()
}

// userContent is a plain string for text alone (what every server accepts: several
// texts joined by blank lines), else the parts in order.
func userContent(blocks []presenters.Block) any {
	var parts []contentPart
	for _, b := range blocks {
		switch b.Type {
		case presenters.BlockText:
			parts = append(parts, contentPart{Type: "text", Text: b.Text})
		case presenters.BlockImage:
			url := b.Image.URL
			if b.Image.Base64 != "" {
				url = "data:" + b.Image.MimeType + ";base64," + b.Image.Base64
			}
			parts = append(parts, contentPart{Type: "image_url", ImageURL: &imageURL{URL: url}})
		case presenters.BlockResource:
			r := b.Resource
			label := r.URI
			if r.Name != "" {
				label = r.Name + " (" + r.URI + ")"
			}
			if r.Text != "" {
				parts = append(parts, contentPart{Type: "text", Text: "Attached " + label + ":\n" + r.Text})
			} else {
				parts = append(parts, contentPart{Type: "text", Text: "Attached " + label + " (binary or too large, contents not shown)."})
			}
		}
	}
	if len(parts) == 0 {
		return nil
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type != "text" {
			return parts
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n\n")
}

func assistantMessages(blocks []presenters.Block) []chatMessage {
	var out []chatMessage
	var text strings.Builder
	var calls []toolCall
	var results []chatMessage
	flush := func() {
		if text.Len() == 0 && len(calls) == 0 {
			return
		}
		m := chatMessage{Role: "assistant", ToolCalls: calls}
		if text.Len() > 0 {
			m.Content = text.String()
		}
		out = append(out, m)
		out = append(out, results...)
		text.Reset()
		calls, results = nil, nil
	}
	for _, b := range blocks {
		switch b.Type {
		case presenters.BlockText:
			if len(calls) > 0 {
				flush()
			}
			text.WriteString(b.Text)
		case presenters.BlockTool:
			tc := b.Tool
			calls = append(calls, toolCall{ID: tc.ToolID, Type: "function", Function: functionCall{Name: tc.ToolName, Arguments: argumentText(tc.Arguments)}})
			results = append(results, chatMessage{Role: "tool", ToolCallID: tc.ToolID, Content: toolResultText(*tc)})
		}
	}
	flush()
	return out
}

// argumentText gives back the arguments string the model sent.
func argumentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// toolResultText is what the model read back from a tool call.
func toolResultText(tc presenters.ToolCall) string {
	if len(tc.Result) > 0 {
		var s string
		if json.Unmarshal(tc.Result, &s) == nil {
			return s
		}
		return string(tc.Result)
	}
	if tc.Error != "" {
		return "Error: " + tc.Error
	}
	return "The tool call was interrupted before it finished."
}
