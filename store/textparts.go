package store

import (
	"database/sql/driver"
	"fmt"
	"iter"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/agenticd/agenticd/presenters"
)

// textPartBytes bounds one stored part of a text. A save binds a text part by part:
// SQLite copies every bound value and builds a record around it, so binding a 20 MB
// reply whole cost several times that in memory at once. Parts also let a
// checkpoint of a growing text rewrite only its last part and the new ones instead of
// the whole text each time.
const textPartBytes = 256 << 10

// statementBytes bounds the text, payload and raw bytes one multi-row INSERT binds; a
// row larger than that on its own still goes, alone.
const statementBytes = 1 << 20

// statementRows bounds the rows of one multi-row INSERT (at most 11 parameters a row).
const statementRows = 50

// splitText cuts s into parts of at most limit bytes (limit > 0) and appends them to
// dst: at least one part ("" for ""). A cut is moved back to where a character starts,
// so with valid UTF-8 and limit >= utf8.UTFMax every part is valid UTF-8 on its own.
// Where each cut falls depends only on the limit+1 bytes from the previous cut, so when
// s grows by appending, every part but its old last one stays the same.
func splitText(dst []string, s string, limit int) []string {
	parts := slices.Grow(dst, len(s)/limit+1)
	for len(s) > limit {
		cut := limit
		for back := 0; back < utf8.UTFMax-1 && cut > 1 && !utf8.RuneStart(s[cut]); back++ {
			cut--
		}
		if !utf8.RuneStart(s[cut]) { // not UTF-8 here: any cut will do
			cut = limit
		}
		parts = append(parts, s[:cut])
		s = s[cut:]
	}
	return append(parts, s)
}

// statements cuts rows into the runs that each go into one multi-row INSERT: at most
// statementRows rows, and at most statementBytes bytes by size unless one row alone is
// larger.
func statements[T any](rows []T, size func(T) int) iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		for len(rows) > 0 {
			n, bytes := 1, size(rows[0])
			for n < len(rows) && n < statementRows && bytes+size(rows[n]) <= statementBytes {
				bytes += size(rows[n])
				n++
			}
			if !yield(rows[:n]) {
				return
			}
			rows = rows[n:]
		}
	}
}

// textArg binds a string as the bytes it is made of, for a parameter that the SQL casts
// back to TEXT (CAST(? AS TEXT)): mattn/go-sqlite3 copies a bound string into a new
// []byte before SQLite copies it again, but binds a []byte as it is, and for long texts
// and payloads that Go copy was most of what a save allocated. The bytes are only read,
// and SQLite has copied them (SQLITE_TRANSIENT) before the statement runs.
type textArg string

// Value implements driver.Valuer.
func (t textArg) Value() (driver.Value, error) {
	if t == "" {
		return []byte{}, nil // a nil []byte would bind NULL
	}
	return unsafe.Slice(unsafe.StringData(string(t)), len(t)), nil
}

// blockHead is a row of the blocks table as written: the block with only the first part
// of its text, and how many parts follow in block_text_parts.
type blockHead struct {
	row       blockRow
	text      string
	textParts int
}

// size is what writing the row binds, roughly, in bytes.
func (h blockHead) size() int {
	r := h.row
	return len(r.MessageID) + len(h.text) + len(r.ToolID) + len(r.ToolName) + len(r.RawArguments) + len(r.RawResult) + len(r.Payload)
}

// textPart is a row of block_text_parts: part Part (from 1) of the text of block
// Position of message MessageID.
type textPart struct {
	MessageID string
	Position  int
	Part      int
	Text      string
}

func (p textPart) size() int { return len(p.MessageID) + len(p.Text) }

// textCount sets how many parts follow the first of block Position's text, whose blocks
// row is otherwise unchanged.
type textCount struct {
	Position  int
	TextParts int
}

// textTrim drops the parts from Keep on of block Position's text: it has fewer now.
type textTrim struct {
	Position int
	Keep     int
}

// blockWrites is what a save writes of a message's blocks.
type blockWrites struct {
	heads  []blockHead
	counts []textCount
	parts  []textPart
	trims  []textTrim
}

// storedRow is a block row as the store last committed it for a message in progress. A
// block saved with its whole text keeps that text (the caller's string, not a copy). A
// text appended to (MessageUpdate) is known only by its count of parts and its last part:
// the next append rewrites that part and adds new ones, and nothing holds the whole text.
type storedRow struct {
	row blockRow // row.Text: the whole text, or with tailOnly the text's last part
	// tailOnly: row.Text is the last of parts parts.
	tailOnly bool
	parts    int
}

// tail is the stored text's count of parts and its last part.
func (r storedRow) tail() (parts int, last string) {
	if r.tailOnly {
		return r.parts, r.row.Text
	}
	p := splitText(nil, r.row.Text, textPartBytes)
	return len(p), p[len(p)-1]
}

// isText reports whether the block holds text (text or reasoning).
func (r blockRow) isText() bool {
	return r.Type == string(presenters.BlockText) || r.Type == string(presenters.BlockReasoning)
}

// planBlockWrites compares the rows a message now has with those stored (prev; nil when
// none are) and returns the writes that make the stored rows the new ones, all but the
// deletion of blocks past the new last one, and the rows as they will be stored. A row
// whose appended flag is set carries in its Text only what follows its stored text; it
// must be a stored text block of the same type.
//
// Otherwise it writes blocks rows that differ in more than their text's count of parts (a
// text that only grew keeps its first part, and its row is not rewritten), counts that
// changed, text parts that are new or differ, and parts to drop. A text known only by its
// tail is rewritten whole.
func planBlockWrites(rows []blockRow, appended []bool, prev []storedRow) (blockWrites, []storedRow, error) {
	var w blockWrites
	stored := make([]storedRow, len(rows))
	var cur, old []string // reused: their parts are copied out
	for i, r := range rows {
		if appended[i] {
			if i >= len(prev) || !prev[i].row.isText() || !r.sameExceptText(prev[i].row) {
				return w, nil, fmt.Errorf("block %d: text appended to a block that is not stored as %s text: %w", i, r.Type, presenters.ErrInvalidArgument)
			}
			stored[i] = planAppend(&w, r, prev[i])
			continue
		}
		stored[i] = storedRow{row: r}
		cur = splitText(cur[:0], r.Text, textPartBytes)
		old = old[:0]
		oldParts := 0
		switch {
		case i >= len(prev):
		case prev[i].tailOnly:
			oldParts = prev[i].parts
		default:
			old = splitText(old, prev[i].row.Text, textPartBytes)
			oldParts = len(old)
		}
		switch {
		case i >= len(prev) || !r.sameExceptText(prev[i].row) || len(old) == 0 || cur[0] != old[0]:
			w.heads = append(w.heads, blockHead{row: r, text: cur[0], textParts: len(cur) - 1})
		case len(cur) != len(old):
			w.counts = append(w.counts, textCount{Position: r.Position, TextParts: len(cur) - 1})
		}
		for k := 1; k < len(cur); k++ {
			if k >= len(old) || cur[k] != old[k] {
				w.parts = append(w.parts, textPart{MessageID: r.MessageID, Position: r.Position, Part: k, Text: cur[k]})
			}
		}
		if oldParts > len(cur) {
			w.trims = append(w.trims, textTrim{Position: r.Position, Keep: len(cur)})
		}
	}
	return w, stored, nil
}

// planAppend adds to w the writes that append r.Text to the stored text prev: its last
// part rewritten and new parts after it (text is cut where a whole save would cut it, since
// a cut depends only on the bytes since the previous one). It returns the row as stored.
func planAppend(w *blockWrites, r blockRow, prev storedRow) storedRow {
	if r.Text == "" {
		return prev
	}
	parts, last := prev.tail()
	grown := splitText(nil, last+r.Text, textPartBytes)
	first := parts - 1 // the part that was last
	total := first + len(grown)
	if first == 0 {
		w.heads = append(w.heads, blockHead{row: r, text: grown[0], textParts: total - 1})
	} else if total != parts {
		w.counts = append(w.counts, textCount{Position: r.Position, TextParts: total - 1})
	}
	for k, text := range grown {
		if first+k > 0 {
			w.parts = append(w.parts, textPart{MessageID: r.MessageID, Position: r.Position, Part: first + k, Text: text})
		}
	}
	// A copy: the last part must not keep the caller's text, or the text it was cut
	// from, alive.
	r.Text = strings.Clone(grown[len(grown)-1])
	return storedRow{row: r, tailOnly: true, parts: total}
}

// longText joins the text of a block stored in parts as Messages reads it: the block's
// row (part 0, decoded into block), then the rows of its further parts in order.
type longText struct {
	block     *presenters.Block // nil when no text is being joined
	messageID string
	seq       int64
	position  int
	parts     []string // parts[0] is the block row's text
	textParts int      // how many parts follow the first, as the block row says
}

func (l *longText) start(block *presenters.Block, messageID string, seq int64, position, textParts int) {
	parts := make([]string, 1, textParts+1)
	parts[0] = block.Text
	*l = longText{block: block, messageID: messageID, seq: seq, position: position, parts: parts, textParts: textParts}
}

// add takes the next part row read. A part row of no block being joined, or past the
// count its block row gives, is not part of any text and is skipped.
func (l *longText) add(seq int64, position, part int, text string) {
	if l.block == nil || seq != l.seq || position != l.position || part > l.textParts {
		return
	}
	if part == len(l.parts) { // a missing part leaves the text short: finish tells
		l.parts = append(l.parts, text)
	}
}

// finish sets the joined text on its block, once its last part row has been read.
func (l *longText) finish() error {
	if l.block == nil {
		return nil
	}
	defer func() { *l = longText{} }()
	if len(l.parts) != l.textParts+1 {
		return fmt.Errorf("stored text of block %d of message %s lacks its part %d of %d: the history database is damaged; restore it from a backup",
			l.position, l.messageID, len(l.parts), l.textParts)
	}
	l.block.Text = strings.Join(l.parts, "")
	return nil
}
