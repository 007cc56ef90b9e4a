package sandbox

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// outputBuffer keeps the newest bytes of a terminal's output, at most limit
// of them, starting at a UTF-8 character boundary (ACP outputByteLimit:
// truncate from the beginning at a character boundary).
//
// The bytes live in buf[start:]. buf grows up to 2*limit; once full, the
// kept bytes are moved to the front, so each byte is copied at most about
// once more however much a command prints.
type outputBuffer struct {
	mu        sync.Mutex
	limit     int
	buf       []byte
	start     int
	truncated bool
	written   uint64 // every byte the command printed, kept or not
}

func newOutputBuffer(limit int) *outputBuffer {
	return &outputBuffer{limit: limit, buf: make([]byte, 0, min(limit, 4096))}
}

func (b *outputBuffer) write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.written += uint64(len(p))
	cut := false
	if len(p) > b.limit {
		p = p[len(p)-b.limit:]
		b.start = len(b.buf)
		b.truncated = true
		cut = true
	}
	if kept := len(b.buf) - b.start; kept+len(p) > b.limit {
		b.start += kept + len(p) - b.limit
		b.truncated = true
		cut = true
	}
	if len(b.buf)+len(p) > cap(b.buf) {
		kept := b.buf[b.start:]
		next := b.buf[:0]
		if cap(b.buf) < 2*b.limit {
			next = make([]byte, 0, min(2*b.limit, max(2*cap(b.buf), len(kept)+len(p))))
		}
		b.buf = append(next, kept...) // copy handles the overlap when reusing
		b.start = 0
	}
	b.buf = append(b.buf, p...)
	if cut {
		// Never start inside a character: skip at most the three
		// continuation bytes a UTF-8 sequence can have.
		for i := 0; i < utf8.UTFMax-1 && b.start < len(b.buf) && !utf8.RuneStart(b.buf[b.start]); i++ {
			b.start++
		}
	}
}

// snapshot returns the kept output as valid UTF-8, whether anything was
// dropped, and the offset of the output's first byte in all the command
// printed. While the command may still write (final false), a character
// whose bytes have not all arrived is held back for the next call; once
// final, such bytes (and any invalid ones) become U+FFFD, so offsets are
// exact for output that is valid UTF-8.
func (b *outputBuffer) snapshot(final bool) (string, bool, uint64) {
	b.mu.Lock()
	data := b.buf[b.start:]
	written := b.written
	offset := written - uint64(len(data))
	if !final {
		data = data[:len(data)-incompleteSuffix(data)]
	}
	s := string(data)
	truncated := b.truncated
	b.mu.Unlock()
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
		// Replacement characters are wider than the bytes they replace.
		for len(s) > b.limit {
			_, size := utf8.DecodeRuneInString(s)
			s = s[size:]
			truncated = true
		}
		if s == "" {
			offset = written
		}
	}
	return s, truncated, offset
}

// incompleteSuffix is the length of a trailing UTF-8 sequence whose
// remaining bytes have not arrived yet (0 if the data ends on a boundary).
func incompleteSuffix(data []byte) int {
	for k := 1; k <= utf8.UTFMax-1 && k <= len(data); k++ {
		c := data[len(data)-k]
		if c < utf8.RuneSelf {
			return 0
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(data[len(data)-k:]) {
				return 0
			}
			return k
		}
	}
	return 0
}
