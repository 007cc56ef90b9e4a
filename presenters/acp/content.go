package acp

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

// maxImageBytes bounds an image read from the workspace for a prompt.
const maxImageBytes = 20 << 20

// promptContent converts what a user sends to ACP content blocks, and to the blocks
// stored as the user's message, part by part in the order the user gave them. Content
// the agent did not declare (images without promptCapabilities.image, embedded
// resources without embeddedContext) is refused rather than sent: ACP forbids it.
// Errors name the part as content.parts[i].
func promptContent(c presenters.MessageContent, ws *sandbox.Workspace, caps sdk.PromptCapabilities, agentID string) ([]sdk.ContentBlock, []presenters.Block, error) {
	prompt := make([]sdk.ContentBlock, 0, len(c.Parts))
	stored := make([]presenters.Block, 0, len(c.Parts))
	for i, part := range c.Parts {
		block, keep, err := partContent(part, ws, caps, agentID)
		if err != nil {
			return nil, nil, fmt.Errorf("content.parts[%d]: %w", i, err)
		}
		prompt = append(prompt, block)
		stored = append(stored, keep)
	}
	return prompt, stored, nil
}

// partContent converts one part of a user's message.
func partContent(part presenters.ContentPart, ws *sandbox.Workspace, caps sdk.PromptCapabilities, agentID string) (sdk.ContentBlock, presenters.Block, error) {
	switch {
	case part.Image != nil:
		if !caps.Image {
			return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("agent %s does not accept images; send text or files instead: %w", agentID, presenters.ErrInvalidArgument)
		}
		return imageContent(*part.Image, ws)
	case part.File != nil:
		return fileContent(*part.File, ws)
	case part.Resource != nil:
		r := part.Resource
		if !caps.EmbeddedContext {
			return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("agent %s does not accept embedded resources; attach them as files instead: %w", agentID, presenters.ErrInvalidArgument)
		}
		if r.URI == "" {
			return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("the resource has no uri: %w", presenters.ErrInvalidArgument)
		}
		var res sdk.EmbeddedResourceResource
		if r.Blob != "" {
			res.BlobResourceContents = &sdk.BlobResourceContents{Uri: r.URI, Blob: r.Blob, MimeType: nonEmpty(r.MimeType)}
		} else {
			res.TextResourceContents = &sdk.TextResourceContents{Uri: r.URI, Text: r.Text, MimeType: nonEmpty(r.MimeType)}
		}
		return sdk.ResourceBlock(res), presenters.Block{Type: presenters.BlockResource, Resource: &presenters.ResourceBlock{
			URI: r.URI, MimeType: r.MimeType, Text: r.Text, Blob: r.Blob}}, nil
	case part.Text != "":
		return sdk.TextBlock(part.Text), presenters.Block{Type: presenters.BlockText, Text: part.Text}, nil
	}
	return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("the part is empty; set its text, image, file or resource: %w", presenters.ErrInvalidArgument)
}

// fileContent sends a workspace file as a resource link: the agent reads it itself.
func fileContent(f presenters.File, ws *sandbox.Workspace) (sdk.ContentBlock, presenters.Block, error) {
	abs, err := ws.Resolve(f.Path)
	if err != nil {
		return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("file %s: %v: %w", f.Path, err, presenters.ErrInvalidArgument)
	}
	name := f.Name
	if name == "" {
		name = filepath.Base(abs)
	}
	uri := (&url.URL{Scheme: "file", Path: abs}).String()
	link := sdk.ResourceLinkBlock(name, uri)
	mimeType := f.MimeType
	if mimeType == "" {
		mimeType = mime.TypeByExtension(filepath.Ext(abs))
	}
	if mimeType != "" {
		link.ResourceLink.MimeType = &mimeType
	}
	return link, presenters.Block{Type: presenters.BlockResource, Resource: &presenters.ResourceBlock{URI: uri, Name: name, MimeType: mimeType}}, nil
}

// imageContent builds an ACP image block. ACP images carry their bytes: base64 and
// data: URLs are sent as they are, workspace files are read; an http(s) URL is sent as
// a resource link (the server does not fetch URLs).
func imageContent(img presenters.Image, ws *sandbox.Workspace) (sdk.ContentBlock, presenters.Block, error) {
	switch img.Kind {
	case presenters.ImageBase64:
		if img.MimeType == "" {
			return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("a base64 image needs its mime_type: %w", presenters.ErrInvalidArgument)
		}
		if _, err := base64.StdEncoding.DecodeString(img.Data); err != nil {
			return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("the image is not valid base64: %w", presenters.ErrInvalidArgument)
		}
		return sdk.ImageBlock(img.Data, img.MimeType), presenters.Block{Type: presenters.BlockImage,
			Image: &presenters.ImageBlock{MimeType: img.MimeType, Base64: img.Data}}, nil
	case presenters.ImageURL:
		if data, mimeType, ok := parseDataURL(img.Data); ok {
			return sdk.ImageBlock(data, mimeType), presenters.Block{Type: presenters.BlockImage,
				Image: &presenters.ImageBlock{MimeType: mimeType, Base64: data}}, nil
		}
		u, err := url.Parse(img.Data)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("image url %q is neither http(s) nor a base64 data: URL: %w", img.Data, presenters.ErrInvalidArgument)
		}
		link := sdk.ResourceLinkBlock(filepath.Base(u.Path), img.Data)
		if img.MimeType != "" {
			link.ResourceLink.MimeType = &img.MimeType
		}
		return link, presenters.Block{Type: presenters.BlockImage, Image: &presenters.ImageBlock{MimeType: img.MimeType, URL: img.Data}}, nil
	case presenters.ImageFile:
		abs, err := ws.Resolve(img.Data)
		if err != nil {
			return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("%v: %w", err, presenters.ErrInvalidArgument)
		}
		info, err := os.Stat(abs)
		if err != nil {
			return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("image file %s: %v: %w", img.Data, err, presenters.ErrInvalidArgument)
		}
		if info.Size() > maxImageBytes {
			return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("image file %s is larger than %d MiB: %w", img.Data, maxImageBytes>>20, presenters.ErrInvalidArgument)
		}
		b, err := os.ReadFile(abs)
		if err != nil {
			return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("image file %s: %v: %w", img.Data, err, presenters.ErrInvalidArgument)
		}
		mimeType := img.MimeType
		if mimeType == "" {
			mimeType = http.DetectContentType(b)
		}
		if !strings.HasPrefix(mimeType, "image/") {
			return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("file %s is %s, not an image: %w", img.Data, mimeType, presenters.ErrInvalidArgument)
		}
		uri := (&url.URL{Scheme: "file", Path: abs}).String()
		block := sdk.ImageBlock(base64.StdEncoding.EncodeToString(b), mimeType)
		block.Image.Uri = &uri
		// The bytes stay in the workspace; the stored message points at them.
		return block, presenters.Block{Type: presenters.BlockImage, Image: &presenters.ImageBlock{MimeType: mimeType, URL: uri}}, nil
	}
	return sdk.ContentBlock{}, presenters.Block{}, fmt.Errorf("image kind %q is not url, base64 or file: %w", img.Kind, presenters.ErrInvalidArgument)
}

// parseDataURL splits a base64 data: URL.
func parseDataURL(s string) (data, mimeType string, ok bool) {
	rest, found := strings.CutPrefix(s, "data:")
	if !found {
		return "", "", false
	}
	meta, payload, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mimeType, isBase64 := strings.CutSuffix(meta, ";base64")
	if !isBase64 || mimeType == "" {
		return "", "", false
	}
	return payload, mimeType, true
}
