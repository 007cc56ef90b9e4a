package deepchat

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agenticd/agenticd/presenters"
)

// lines is n numbered lines of about width bytes each, every one holding a multi-byte
// character, so that byte cuts would easily split one.
func lines(n, width int) string {
	var sb strings.Builder
	for i := range n {
		sb.WriteString(strings.Repeat("é", width/2-4))
		sb.WriteString(fmt.Sprintf("x%06d\n", i))
	}
	return sb.String()
}

func TestBoundedDiff(t *testing.T) {
	big := lines(20000, 60) // about 1.2 MB
	mid := strings.Index(big, "x010000\n")
	cases := []struct {
		name     string
		old, new string
		change   string // text of the change that must be shown on the new side
		whole    bool   // both sides kept as they are
		head     bool   // a marker for unchanged text before
		tail     bool   // a marker for unchanged text after
	}{
		{"small diffs are whole", "a\nb\n", "a\nc\n", "c", true, false, false},
		{"change in the middle", big, big[:mid] + "CHANGED\n" + big[mid:], "CHANGED", false, true, true},
		{"change at the start", big, "FIRST\n" + big, "FIRST", false, false, true},
		{"change at the end", big, big + "LAST\n", "LAST", false, true, false},
		{"new large file", "", big, "x000000", false, false, false},
		{"change inside a character", big[:mid] + "é" + big[mid:], big[:mid] + "è" + big[mid:], "è", false, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := boundedDiff("/w/f.txt", tc.old, tc.new)
			if d.Path != "/w/f.txt" {
				t.Fatalf("path = %q", d.Path)
			}
			if tc.whole {
				if d.OldText != tc.old || d.NewText != tc.new {
					t.Fatalf("small diff changed: %+v", d)
				}
				return
			}
			for side, text := range map[string]string{"old": d.OldText, "new": d.NewText} {
				if len(text) > diffTextLimit+2*diffContext+512 {
					t.Errorf("%s side is %d bytes", side, len(text))
				}
				if !utf8.ValidString(text) {
					t.Errorf("%s side is not valid UTF-8", side)
				}
				if head := strings.HasPrefix(text, "[agenticd: "); head != tc.head {
					t.Errorf("%s side: head marker %v, want %v", side, head, tc.head)
				}
			}
			if !strings.Contains(d.NewText, tc.change) {
				t.Fatalf("the change %q is not shown", tc.change)
			}
			tail := strings.Contains(d.NewText, "after this point are not shown")
			if tail != tc.tail {
				t.Fatalf("tail marker %v, want %v", tail, tc.tail)
			}
			// The sides differ only in the change: markers and context are the same.
			pre := commonPrefixLen(d.OldText, d.NewText)
			suf := commonSuffixLen(d.OldText[pre:], d.NewText[pre:])
			if tc.old != "" && len(d.NewText)-pre-suf > len(tc.change)+4 {
				t.Fatalf("the excerpts differ in %d bytes, the change is %d", len(d.NewText)-pre-suf, len(tc.change))
			}
		})
	}
	// A change larger than the limit is cut, and says so.
	d := boundedDiff("/w/f", "", big)
	if !strings.Contains(d.NewText, "more bytes are not shown") || !strings.HasPrefix(big, strings.SplitN(d.NewText, "\n[agenticd", 2)[0]) {
		t.Fatalf("cut change: %q", d.NewText[len(d.NewText)-200:])
	}
}

// TestEditOfALargeFileSendsAnExcerpt edits a file of about 1.2 MB: the diff in the
// TOOL_END event and in the stored block is bounded, and the file is edited whole.
func TestEditOfALargeFileSendsAnExcerpt(t *testing.T) {
	h := newHarness(t)
	big := lines(20000, 60)
	h.writeFile("big.txt", big)
	info := h.createSession(ModePermissive)
	h.llm.script(toolReply("call_e", "edit_file", `{"path":"big.txt","old_string":"x010000\n","new_string":"x010000 edited\n"}`), textReply("done"))
	h.turn(info.SessionID, "edit it")
	if content, _ := h.readFile("big.txt"); content != strings.Replace(big, "x010000\n", "x010000 edited\n", 1) {
		t.Fatal("the file was not edited whole")
	}
	end := ofType[presenters.ToolEndPayload](h.rec.all())[0].Tool
	stored := h.messages(info.SessionID)[1].Blocks[0].Tool
	for _, tc := range []presenters.ToolCall{end, *stored} {
		if tc.Status != presenters.ToolCompleted || len(tc.Content) != 1 || tc.Content[0].Diff == nil {
			t.Fatalf("tool = %+v", tc)
		}
		d := tc.Content[0].Diff
		if len(d.OldText) > 64<<10 || len(d.NewText) > 64<<10 || !strings.Contains(d.NewText, "x010000 edited\n") ||
			!strings.Contains(d.OldText, "unchanged lines") {
			t.Fatalf("diff sides of %d and %d bytes: %.200q", len(d.OldText), len(d.NewText), d.NewText)
		}
	}
}

// TestLargeImagesAreShownByReference attaches a large and a small image file: the model
// gets both inline; GetMessages and the LoadSession replay give the large one by its
// file:// URL and the small one inline.
func TestLargeImagesAreShownByReference(t *testing.T) {
	h := newHarness(t)
	large := strings.Repeat("\x89PNG", inlineImageLimit/4) // its base64 is over the limit
	h.writeFile("large.png", large)
	h.writeFile("small.png", "\x89PNG small")
	info := h.createSession("")
	h.llm.script(textReply("two images"))
	res, err := h.p.SendMessage(context.Background(), info.SessionID, presenters.MessageContent{Parts: []presenters.ContentPart{{Text: "look"},
		{Image: &presenters.Image{Kind: presenters.ImageFile, Data: "large.png"}}, {Image: &presenters.Image{Kind: presenters.ImageFile, Data: "small.png"}}}},
		presenters.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.waitEnd(res.MessageID)
	parts := h.llm.requestsSoFar()[0].body.Messages[1].Content.([]any)
	for i, want := range []string{large, "\x89PNG small"} {
		url := parts[i+1].(map[string]any)["image_url"].(map[string]any)["url"].(string)
		if url != "data:image/png;base64,"+base64.StdEncoding.EncodeToString([]byte(want)) {
			t.Fatalf("image %d sent to the model as %.80s", i, url)
		}
	}
	largeURL := "file://" + filepath.Join(h.workspace, "large.png")
	check := func(where string, blocks []presenters.Block) {
		t.Helper()
		if img := blocks[0].Image; img.URL != largeURL || img.Base64 != "" || img.MimeType != "image/png" {
			t.Fatalf("%s: large image = %s %q %d bytes of base64", where, img.MimeType, img.URL, len(img.Base64))
		}
		if img := blocks[1].Image; img.URL != "" || img.Base64 != base64.StdEncoding.EncodeToString([]byte("\x89PNG small")) {
			t.Fatalf("%s: small image = %+v", where, img)
		}
	}
	check("GetMessages", h.messages(info.SessionID)[0].Blocks[1:])
	stored, _ := h.store.Messages(context.Background(), info.SessionID, presenters.MessageQuery{})
	if img := stored[0].Blocks[1].Image; img.Base64 == "" || img.URL != largeURL {
		t.Fatalf("stored large image = %q with %d bytes of base64", img.URL, len(img.Base64))
	}
	h.rec = newRecorder()
	h.p.deps.Publisher = h.rec
	if _, err := h.p.LoadSession(context.Background(), info.SessionID, presenters.LoadContext{}); err != nil {
		t.Fatal(err)
	}
	var replayed []presenters.Block
	for _, b := range ofType[presenters.MessageBlockPayload](h.rec.all()) {
		if b.Block.Type == presenters.BlockImage {
			replayed = append(replayed, b.Block)
		}
	}
	if len(replayed) != 2 {
		t.Fatalf("replayed %d images", len(replayed))
	}
	check("replay", replayed)
}

// An image path that names a FIFO is refused at once (never opened for a blocking read).
func TestImageAttachmentMustBeARegularFile(t *testing.T) {
	h := newHarness(t)
	if err := mkfifo(filepath.Join(h.workspace, "pipe.png")); err != nil {
		t.Skip(err)
	}
	info := h.createSession("")
	_, err := h.p.SendMessage(context.Background(), info.SessionID, presenters.MessageContent{Parts: []presenters.ContentPart{
		{Image: &presenters.Image{Kind: presenters.ImageFile, Data: "pipe.png"}}}}, presenters.SendOptions{})
	if err == nil || !strings.Contains(err.Error(), "pipe.png") {
		t.Fatalf("FIFO attached: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.workspace, "pipe.png")); err != nil {
		t.Fatal(err)
	}
}
