package mcp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agenticd/agenticd/presenters"
)

// uiScheme starts the URIs of MCP UI resources: HTML or a remote page a client shows as
// interactive UI.
const uiScheme = "ui://"

// resultOf turns a tool result into the call's content and the model's text. Text
// content is passed as it is; every other piece is content for clients and a short line
// for the model, which reads no images or binary data here.
func resultOf(res *sdk.CallToolResult) Result {
	out := Result{IsError: res.IsError}
	var text []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			text = append(text, c.Text)
			out.Content = append(out.Content, presenters.ToolContent{Text: c.Text})
		case *sdk.ImageContent:
			out.Content = append(out.Content, presenters.ToolContent{Image: &presenters.ImageBlock{
				MimeType: c.MIMEType, Base64: base64.StdEncoding.EncodeToString(c.Data)}})
			text = append(text, fmt.Sprintf("[image %s, %d bytes, shown to the user]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			text = append(text, fmt.Sprintf("[audio %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			out.Content = append(out.Content, presenters.ToolContent{Resource: &presenters.ResourceBlock{
				URI: c.URI, Name: c.Name, MimeType: c.MIMEType}})
			text = append(text, "[resource link "+label(c.Name, c.URI)+"]")
		case *sdk.EmbeddedResource:
			if c.Resource == nil {
				continue
			}
			r := c.Resource
			if strings.HasPrefix(r.URI, uiScheme) {
				body := r.Text
				if body == "" && len(r.Blob) > 0 {
					body = string(r.Blob)
				}
				out.UIResources = append(out.UIResources, presenters.McpUIResourceBlock{URI: r.URI, MimeType: r.MIMEType, Text: body})
				text = append(text, "[interactive UI "+r.URI+", shown to the user]")
				continue
			}
			block := &presenters.ResourceBlock{URI: r.URI, MimeType: r.MIMEType, Text: r.Text}
			if len(r.Blob) > 0 {
				block.Blob = base64.StdEncoding.EncodeToString(r.Blob)
			}
			out.Content = append(out.Content, presenters.ToolContent{Resource: block})
			if r.Text != "" {
				text = append(text, "Resource "+r.URI+":\n"+r.Text)
			} else {
				text = append(text, fmt.Sprintf("[resource %s, %s, %d bytes of binary data, not shown]", r.URI, r.MIMEType, len(r.Blob)))
			}
		}
	}
	if len(text) == 0 && res.StructuredContent != nil {
		if data, err := json.Marshal(res.StructuredContent); err == nil {
			text = append(text, string(data))
			out.Content = append(out.Content, presenters.ToolContent{Text: string(data)})
		}
	}
	out.Text = strings.Join(text, "\n")
	if out.Text == "" {
		out.Text = "(no output)"
	}
	return out
}

func label(name, uri string) string {
	if name == "" || name == uri {
		return uri
	}
	return name + " (" + uri + ")"
}
