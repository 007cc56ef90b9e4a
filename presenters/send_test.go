package presenters

import (
	"errors"
	"testing"
)

// A message needs content and well-formed ids, whichever is wrong.
func TestCheckSend(t *testing.T) {
	cases := []struct {
		name    string
		content MessageContent
		opts    SendOptions
		ok      bool
	}{
		{"text", TextContent("hi"), SendOptions{}, true},
		{"chosen ids", TextContent("hi"), SendOptions{MessageID: "a-1", UserMessageID: "u.1"}, true},
		{"empty", MessageContent{}, SendOptions{}, false},
		{"empty with good ids", MessageContent{}, SendOptions{MessageID: "a-1"}, false},
		{"bad id", TextContent("hi"), SendOptions{MessageID: "a b"}, false},
		{"one id twice", TextContent("hi"), SendOptions{MessageID: "x", UserMessageID: "x"}, false},
	}
	for _, c := range cases {
		err := CheckSend(c.content, c.opts)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidArgument)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
