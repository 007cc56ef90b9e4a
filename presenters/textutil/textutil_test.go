package textutil

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrefixAndSuffixNeverSplitACharacter(t *testing.T) {
	// 1-, 2-, 3- and 4-byte characters.
	s := "aé€😀b"
	cases := []struct {
		n              int
		prefix, suffix string
	}{
		{-1, "", ""},
		{0, "", ""},
		{1, "a", "b"},
		{2, "a", "b"},
		{3, "aé", "b"},
		{4, "aé", "b"},
		{5, "aé", "😀b"},
		{6, "aé€", "😀b"},
		{9, "aé€", "€😀b"},
		{10, "aé€😀", "é€😀b"},
		{11, s, s},
		{100, s, s},
	}
	for _, c := range cases {
		if got := Prefix(s, c.n); got != c.prefix {
			t.Errorf("Prefix(%q, %d) = %q, want %q", s, c.n, got, c.prefix)
		}
		if got := Suffix(s, c.n); got != c.suffix {
			t.Errorf("Suffix(%q, %d) = %q, want %q", s, c.n, got, c.suffix)
		}
	}
	// Every cut of valid text is valid and within bounds.
	long := strings.Repeat(s, 50)
	for n := 0; n <= len(long); n++ {
		p, q := Prefix(long, n), Suffix(long, n)
		if len(p) > n || len(q) > n || !utf8.ValidString(p) || !utf8.ValidString(q) ||
			!strings.HasPrefix(long, p) || !strings.HasSuffix(long, q) || n-len(p) >= utf8.UTFMax || n-len(q) >= utf8.UTFMax {
			t.Fatalf("n=%d: prefix %q suffix %q", n, p, q)
		}
	}
}

func TestCutOfInvalidTextStaysBounded(t *testing.T) {
	s := "ab" + strings.Repeat("\x80", 10)
	if got := Prefix(s, 8); len(got) > 8 || len(got) < 5 {
		t.Fatalf("Prefix of stray continuation bytes = %q", got)
	}
	if got := Suffix(s, 4); len(got) > 4 {
		t.Fatalf("Suffix = %q", got)
	}
}
