package sandbox

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The buffer against a plain model: keep the last limit bytes of all that
// was written, then drop leading continuation bytes. Writes of varying
// sizes exercise growth, compaction and cuts inside characters.
func TestOutputBufferMatchesModel(t *testing.T) {
	text := []byte(strings.Repeat("ab€😀é\n", 150))
	for _, limit := range []int{1, 2, 3, 4, 5, 17, 64, 1000, 4096, len(text), len(text) + 5} {
		for _, chunk := range []int{1, 3, 7, 64, 999, len(text)} {
			b := newOutputBuffer(limit)
			var all []byte
			for rest := text; len(rest) > 0; {
				n := min(chunk, len(rest))
				b.write(rest[:n])
				all = append(all, rest[:n]...)
				rest = rest[n:]

				got, truncated, offset := b.snapshot(true)
				want := all
				if len(want) > limit {
					want = want[len(want)-limit:]
					for i := 0; i < 3 && len(want) > 0 && !utf8.RuneStart(want[0]); i++ {
						want = want[1:]
					}
				}
				wantText, wantTruncated := strings.ToValidUTF8(string(want), "\uFFFD"), len(all) > limit
				for len(wantText) > limit { // a replacement is wider than the byte it replaces
					_, size := utf8.DecodeRuneInString(wantText)
					wantText, wantTruncated = wantText[size:], true
				}
				if got != wantText || truncated != wantTruncated {
					t.Fatalf("limit %d chunk %d after %d bytes: got %q (truncated %v), want %q", limit, chunk, len(all), got, truncated, want)
				}
				// Valid output starts where the bytes it holds were printed.
				if utf8.Valid(want) && offset != uint64(len(all)-len(want)) {
					t.Fatalf("limit %d chunk %d after %d bytes: offset %d, want %d", limit, chunk, len(all), offset, len(all)-len(want))
				}
			}
		}
	}
}

func TestOutputBufferHoldsBackPartialCharacter(t *testing.T) {
	b := newOutputBuffer(100)
	b.write([]byte("x\xf0\x9f")) // first half of 😀
	if got, _, _ := b.snapshot(false); got != "x" {
		t.Fatalf("running snapshot %q; the partial character should wait", got)
	}
	if got, _, _ := b.snapshot(true); got != "x\uFFFD" {
		t.Fatalf("final snapshot %q; a character that never completed is replaced", got)
	}
	b.write([]byte("\x98\x80"))
	if got, _, _ := b.snapshot(false); got != "x😀" {
		t.Fatalf("snapshot %q after the rest arrived", got)
	}
}

func TestOutputBufferInvalidBytesStayWithinLimit(t *testing.T) {
	b := newOutputBuffer(8)
	b.write([]byte("\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7"))
	got, truncated, _ := b.snapshot(true)
	if !utf8.ValidString(got) || len(got) > 8 || !truncated {
		t.Fatalf("got %q (%d bytes), truncated %v", got, len(got), truncated)
	}
}
