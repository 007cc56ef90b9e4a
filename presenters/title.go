package presenters

import (
	"strings"

	"github.com/agenticd/agenticd/presenters/textutil"
)

// MaxTitleBytes bounds a title taken from a message, "…" included.
const MaxTitleBytes = 80

// TitleFrom names a session after its first message: the first line of its text, else
// the first file's path, else "Image"; shortened at a character boundary with "…".
func TitleFrom(c MessageContent) string {
	text, _, _ := strings.Cut(strings.TrimSpace(c.Text), "\n")
	text = strings.TrimSpace(text)
	if text == "" {
		switch {
		case len(c.Files) > 0:
			text = c.Files[0].Path
		case len(c.Images) > 0:
			text = "Image"
		}
	}
	if len(text) <= MaxTitleBytes {
		return text
	}
	return textutil.Prefix(text, MaxTitleBytes-len("…")) + "…"
}
