package bearer

import "testing"

func TestToken(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER   abc def", "abc def", true},
		{"Bearer", "", true},
		{"", "", false},
		{"Basic YWJj", "", false},
		{"Bearerabc", "", false},
		{" Bearer abc", "", false},
	} {
		token, ok := Token(tc.header)
		if token != tc.token || ok != tc.ok {
			t.Errorf("Token(%q) = %q, %v; want %q, %v", tc.header, token, ok, tc.token, tc.ok)
		}
	}
}
