package service

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// contentFromPB converts and validates what a client sends, part by part in order (the
// agent receives them in that order).
func contentFromPB(c *pb.MessageContent) (presenters.MessageContent, error) {
	if len(c.GetParts()) == 0 {
		return presenters.MessageContent{}, invalidArgument("content is empty: add at least one part (text, image, file or resource)")
	}
	out := presenters.MessageContent{Parts: make([]presenters.ContentPart, len(c.GetParts()))}
	for i, part := range c.GetParts() {
		switch p := part.GetPart().(type) {
		case *pb.ContentPart_Text:
			if p.Text == "" {
				return presenters.MessageContent{}, invalidArgument("content.parts[%d].text is empty: give it text or leave the part out", i)
			}
			out.Parts[i].Text = p.Text
		case *pb.ContentPart_Image:
			img, err := imageFromPB(i, p.Image)
			if err != nil {
				return presenters.MessageContent{}, err
			}
			out.Parts[i].Image = &img
		case *pb.ContentPart_File:
			if p.File.GetPath() == "" {
				return presenters.MessageContent{}, invalidArgument("content.parts[%d].file.path is required (a path inside the session's workspace)", i)
			}
			out.Parts[i].File = &presenters.File{Path: p.File.GetPath(), Name: p.File.GetName(), MimeType: p.File.GetMimeType()}
		case *pb.ContentPart_Resource:
			res, err := resourceFromPB(i, p.Resource)
			if err != nil {
				return presenters.MessageContent{}, err
			}
			out.Parts[i].Resource = &res
		default:
			return presenters.MessageContent{}, invalidArgument("content.parts[%d]: set one of text, image, file or resource", i)
		}
	}
	return out, nil
}

func imageFromPB(i int, img *pb.ImageContent) (presenters.Image, error) {
	switch src := img.GetSource().(type) {
	case *pb.ImageContent_Url:
		if err := checkDataURL(src.Url); err != nil {
			return presenters.Image{}, invalidField(fmt.Sprintf("content.parts[%d].image.url", i), "content.parts[%d].image.url is a data URL that does not decode (%v): send data:<mime type>;base64,<standard base64>, or the bytes in image.data", i, err)
		}
		return presenters.Image{Kind: presenters.ImageURL, Data: src.Url, MimeType: img.GetMimeType()}, nil
	case *pb.ImageContent_Data:
		if img.GetMimeType() == "" {
			return presenters.Image{}, invalidArgument("content.parts[%d].image.mime_type is required with data (e.g. image/png)", i)
		}
		return presenters.Image{Kind: presenters.ImageBase64, Data: base64.StdEncoding.EncodeToString(src.Data), MimeType: img.GetMimeType()}, nil
	case *pb.ImageContent_FilePath:
		return presenters.Image{Kind: presenters.ImageFile, Data: src.FilePath, MimeType: img.GetMimeType()}, nil
	}
	return presenters.Image{}, invalidArgument("content.parts[%d].image: set one of url, data or file_path", i)
}

// checkDataURL refuses a data URL (RFC 2397) whose base64 payload does not decode: the
// agent would get an image it cannot read, or the provider refuse the whole turn. Other
// URLs are the agent's to fetch.
func checkDataURL(url string) error {
	if len(url) < len("data:") || !strings.EqualFold(url[:len("data:")], "data:") {
		return nil
	}
	meta, data, ok := strings.Cut(url[len("data:"):], ",")
	if !ok {
		return errors.New("no comma ends its media type")
	}
	if !strings.HasSuffix(strings.ToLower(meta), ";base64") {
		return nil
	}
	if _, err := base64.StdEncoding.DecodeString(data); err != nil {
		return err
	}
	return nil
}

func resourceFromPB(i int, r *pb.EmbeddedResource) (presenters.Resource, error) {
	if r.GetUri() == "" {
		return presenters.Resource{}, invalidArgument("content.parts[%d].resource.uri is required", i)
	}
	res := presenters.Resource{URI: r.GetUri(), MimeType: r.GetMimeType()}
	switch body := r.GetContents().(type) {
	case *pb.EmbeddedResource_Text:
		res.Text = body.Text
	case *pb.EmbeddedResource_Blob:
		res.Blob = base64.StdEncoding.EncodeToString(body.Blob)
	default:
		return res, invalidArgument("content.parts[%d].resource: set text or blob", i)
	}
	return res, nil
}
