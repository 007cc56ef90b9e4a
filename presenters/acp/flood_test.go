package acp

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// checkChunks verifies that a turn's deltas are the flood's chunks, each once, in
// order, and returns the text they make.
func checkChunks(t *testing.T, evs []presenters.Event, messageID string, count, size int) string {
	t.Helper()
	var b strings.Builder
	next := 0
	for _, ev := range evs {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		if !ok || d.MessageID != messageID || strings.HasPrefix(d.Text, "permission: ") {
			continue
		}
		idx, err := strconv.Atoi(strings.SplitN(d.Text, "|", 2)[0])
		if err != nil || idx != next || len(d.Text) != size {
			t.Fatalf("delta %d is %q (%d bytes): want chunk %d of %d bytes", next, d.Text[:min(20, len(d.Text))], len(d.Text), next, size)
		}
		b.WriteString(d.Text)
		next++
	}
	if next != count {
		t.Fatalf("got %d chunks, want %d", next, count)
	}
	return b.String()
}

func TestFloodedTurnsArriveWholeAndAreStored(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [
	 [{"flood": {"count": 100000, "size": 64}}],
	 [{"flood": {"count": 20000, "size": 1024}}],
	 [{"text": "still here"}]]}`))
	s := h.create(p)
	for _, f := range []struct{ count, size int }{{100_000, 64}, {20_000, 1024}} {
		t.Run(fmt.Sprintf("%dx%d", f.count, f.size), func(t *testing.T) {
			res, from := h.send(p, s.SessionID, "flood")
			h.finish(s.SessionID, res, from)
			evs := h.rec.eventsOf(s.SessionID, from)
			text := checkChunks(t, evs, res.MessageID, f.count, f.size)
			if got := eventSummary(evs[len(evs)-2].Payload); got != "END assistant "+res.MessageID+" end_turn" {
				t.Fatalf("turn ended with %s", got)
			}
			msgs, err := p.GetMessages(testContext(t), s.SessionID, presenters.MessageQuery{Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if m := msgs[0]; m.ID != res.MessageID || m.Status != presenters.MessageComplete || len(m.Blocks) != 1 || m.Blocks[0].Text != text {
				t.Fatalf("stored message %s %s with %d blocks (text %d bytes, want %d)", m.ID, m.Status, len(m.Blocks), len(m.Blocks[0].Text), len(text))
			}
		})
	}
	res, from := h.send(p, s.SessionID, "and now")
	if got := afterPreamble(t, h.finish(s.SessionID, res, from)); got[0] != `DELTA assistant A "still here"` {
		t.Fatalf("turn after the floods starts with %.80s (%d events)", got[0], len(got))
	}
}

func TestFloodWithAPermissionRequestInTheMiddle(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"flood": {"count": 100000, "size": 64, "permissionAt": 50000}}]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "flood and ask")
	req := h.permissionRequired(s.SessionID, from)
	if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: "allow"}); err != nil {
		t.Fatal(err)
	}
	h.finish(s.SessionID, res, from)
	evs := h.rec.eventsOf(s.SessionID, from)
	checkChunks(t, evs, res.MessageID, 100_000, 64)
	// The agent sent the tool call before its permission request: the request must not
	// overtake it, whatever the flood around them.
	toolAt, askedAt := -1, -1
	for i, ev := range evs {
		switch v := ev.Payload.(type) {
		case presenters.ToolStartPayload:
			if v.Tool.ToolID == "flood-permission" && toolAt < 0 {
				toolAt = i
			}
		case presenters.PermissionRequiredPayload:
			askedAt = i
		}
	}
	if toolAt < 0 || askedAt < toolAt {
		t.Fatalf("TOOL_START of the flood's tool call at event %d, its PERMISSION_REQUIRED at %d: the request overtook it", toolAt, askedAt)
	}
	tail := timeline(evs[len(evs)-3:], map[string]string{res.MessageID: "A"})
	if want := []string{`DELTA assistant A "permission: allow_once allow"`, `END assistant A end_turn`, `STATUS idle`}; strings.Join(tail, "|") != strings.Join(want, "|") {
		t.Fatalf("turn end %q, want %q", tail, want)
	}
}

func TestLoadReplayOfALongHistory(t *testing.T) {
	h := newHarness(t)
	const messages = 50_000
	p := h.presenter(h.config(fmt.Sprintf(`{"agent": {"loadSession": true}, "load": [{"replay": {"messages": %d, "size": 64}}], "turns": [[{"text": "live again"}]]}`, messages)))
	s := h.create(p)
	if err := p.CloseSession(testContext(t), s.SessionID); err != nil {
		t.Fatal(err)
	}
	from := h.rec.len()
	if _, err := p.LoadSession(testContext(t), s.SessionID, presenters.LoadContext{}); err != nil {
		t.Fatal(err)
	}
	evs := h.rec.eventsOf(s.SessionID, from)
	n := 0
	var current string
	for _, ev := range evs {
		switch v := ev.Payload.(type) {
		case presenters.MessageDeltaPayload:
			role, prefix := presenters.RoleUser, "u"
			if n%2 == 1 {
				role, prefix = presenters.RoleAssistant, "a"
			}
			if v.Role != role || !strings.HasPrefix(v.Text, fmt.Sprintf("%s%08d|", prefix, n)) || current != "" {
				t.Fatalf("replayed message %d: %+v", n, v)
			}
			current = v.MessageID
		case presenters.MessageEndPayload:
			if v.MessageID != current {
				t.Fatalf("end of %s while %s was open", v.MessageID, current)
			}
			current = ""
			n++
		case presenters.SessionReadyPayload:
			if v.MessageCount != messages || n != messages {
				t.Fatalf("SESSION_READY %d after %d replayed messages, want %d", v.MessageCount, n, messages)
			}
		}
	}
	if last := evs[len(evs)-1].Payload; last.EventType() != presenters.EventSessionReady {
		t.Fatalf("load did not end with SESSION_READY: %s", eventSummary(last))
	}
	res, from := h.send(p, s.SessionID, "hello")
	if got := afterPreamble(t, h.finish(s.SessionID, res, from)); got[0] != `DELTA assistant A "live again"` {
		t.Fatalf("turn after the replay %q", got)
	}
}
