// Package textutil shortens text without splitting a UTF-8 encoded character. Every
// presenter cut (titles, tool output, provider error bodies, diff excerpts) goes through
// it: a split character is invalid UTF-8, which protobuf refuses to encode, so one bad
// cut would break every event and read that carries the text.
package textutil

import "unicode/utf8"

// Prefix returns the longest prefix of s that is at most n bytes long and does not end
// inside a character. It returns s itself when s fits.
func Prefix(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	// s[n] is the first byte left out; step back over the continuation bytes of the
	// character it belongs to (at most three in valid UTF-8).
	cut := n
	for i := 0; i < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return s[:cut]
}

// Suffix returns the longest suffix of s that is at most n bytes long and does not
// start inside a character. It returns s itself when s fits.
func Suffix(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	start := len(s) - n
	for i := 0; i < utf8.UTFMax-1 && start < len(s) && !utf8.RuneStart(s[start]); i++ {
		start++
	}
	return s[start:]
}
