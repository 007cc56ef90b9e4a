package presenters

import (
	"strings"

	"github.com/agenticd/agenticd/presenters/textutil"
)

// MaxTitleBytes bounds a title taken from a message, "…" included.
const MaxTitleBytes = 80

// TitleFrom names a session after its first message: the first line of its first text,
// else the first file's path, else "Image"; shortened at a character boundary with "…".
func TitleFrom(c MessageContent) string {
	var text, file string
	image := false
	for _, p := range c.Parts {
		switch {
		case p.Text != "":
			if text == "" {
				text, _, _ = strings.Cut(strings.TrimSpace(p.Text), "\n")
				text = strings.TrimSpace(text)
			}
		case p.File != nil:
			if file == "" {
				file = p.File.Path
			}
		case p.Image != nil:
			image = true
		}
	}
	switch {
	case text != "":
	case file != "":
		text = file
	case image:
		text = "Image"
	}
	if len(text) <= MaxTitleBytes {
		return text
	}
	return textutil.Prefix(text, MaxTitleBytes-len("…")) + "…"
}
