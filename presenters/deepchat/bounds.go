package deepchat

import (
	"fmt"
	"strings"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/textutil"
)

// Bounds of what goes into events and stored blocks. An event reaches each subscriber
// as one gRPC message (clients accept 4 MiB by default) and a stored block is read back
// with its whole message, so no block may carry a whole large file.
const (
	// diffTextLimit bounds each side of a diff. A larger one keeps an excerpt: the
	// changed region with up to diffContext bytes of unchanged text around it, each
	// left-out part replaced by a marker line saying what was left out.
	diffTextLimit = 256 << 10
	diffContext   = 8 << 10
	// inlineImageLimit bounds the base64 text of an image read from a workspace file
	// that LoadSession replays or GetMessages returns: a larger one is given by its
	// file:// URL. Images a client sent inline are returned inline: they came through
	// the same API, within its message size.
	inlineImageLimit = 1 << 20
)

// boundedDiff is the diff of a file's change, excerpted when a side is over
// diffTextLimit. The unchanged text left out before and after the change is replaced by
// the same marker line on both sides, so a client's diff of the two texts still shows
// only the change.
func boundedDiff(path, oldText, newText string) *presenters.DiffBlock {
	if len(oldText) <= diffTextLimit && len(newText) <= diffTextLimit {
		return &presenters.DiffBlock{Path: path, OldText: oldText, NewText: newText}
	}
	prefix := commonPrefixLen(oldText, newText)
	suffix := commonSuffixLen(oldText[prefix:], newText[prefix:])

	// Start at a line start at most diffContext (plus one line) before the change.
	start := 0
	if prefix > diffContext {
		start = prefix - diffContext
		if nl := strings.LastIndexByte(oldText[:start], '\n'); nl >= 0 && start-nl <= diffContext {
			start = nl + 1
		} else {
			start = prefix - len(textutil.Suffix(oldText[:prefix], diffContext))
		}
	}
	// End after at most diffContext bytes of the common suffix, at a line end when near.
	common := oldText[len(oldText)-suffix:]
	keep := len(common)
	if keep > diffContext {
		keep = len(textutil.Prefix(common, diffContext))
		if nl := strings.IndexByte(common[keep:], '\n'); nl >= 0 && nl < diffContext {
			keep += nl + 1
		}
	}
	var head, tail string
	if start > 0 {
		head = fmt.Sprintf("[agenticd: %d unchanged lines (%d bytes) before this point are not shown]\n",
			strings.Count(oldText[:start], "\n"), start)
	}
	if left := len(common) - keep; left > 0 {
		tail = fmt.Sprintf("[agenticd: %d unchanged lines (%d bytes) after this point are not shown]",
			strings.Count(common[keep:], "\n"), left)
		if !strings.HasSuffix(common[:keep], "\n") {
			tail = "\n" + tail
		}
	}
	side := func(text string) string {
		excerpt := text[start : len(text)-len(common)+keep]
		if cut := textutil.Prefix(excerpt, diffTextLimit); len(cut) < len(excerpt) {
			excerpt = cut + fmt.Sprintf("\n[agenticd: the change is larger than the %d KiB shown; %d more bytes are not shown]",
				diffTextLimit>>10, len(excerpt)-len(cut))
			return head + excerpt
		}
		return head + excerpt + tail
	}
	return &presenters.DiffBlock{Path: path, OldText: side(oldText), NewText: side(newText)}
}

func commonPrefixLen(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

func commonSuffixLen(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}

// presentBlocks is how stored blocks are shown to clients: an image read from a
// workspace file (stored with both its file:// URL and its base64 data, which the model
// is sent) is shown inline up to inlineImageLimit, else by its URL. The slice is copied
// only when a block changes.
func presentBlocks(blocks []presenters.Block) []presenters.Block {
	out, copied := blocks, false
	for i, b := range blocks {
		img := b.Image
		if b.Type != presenters.BlockImage || img == nil || img.Base64 == "" || !strings.HasPrefix(img.URL, "file://") {
			continue
		}
		shown := &presenters.ImageBlock{MimeType: img.MimeType, Base64: img.Base64}
		if len(img.Base64) > inlineImageLimit {
			shown = &presenters.ImageBlock{MimeType: img.MimeType, URL: img.URL}
		}
		if !copied {
			out, copied = append([]presenters.Block(nil), blocks...), true
		}
		out[i].Image = shown
	}
	return out
}
