package acp

import (
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// formScript asks for a name and an age in a form tied to tool call t1, then says the
// answer.
const formScript = `{"turns": [[
 {"elicit": {"message": "Who are you?", "toolCallId": "t1",
   "schema": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}}}
]]}`

// elicitationRequired waits for the next elicitation of a session.
func (h *harness) elicitationRequired(sessionID string, from int) presenters.ElicitationRequest {
	h.t.Helper()
	ev, _ := h.rec.waitFrom(h.t, from, "an elicitation", func(ev presenters.Event) bool {
		_, ok := ev.Payload.(presenters.ElicitationRequiredPayload)
		return ok && ev.SessionID == sessionID
	})
	return ev.Payload.(presenters.ElicitationRequiredPayload).Request
}

func TestElicitationFormAnsweredByAUser(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(formScript))
	s := h.create(p)
	if !s.Capabilities.SupportsElicitation {
		t.Fatalf("capabilities %+v: want supports_elicitation", s.Capabilities)
	}
	for _, tc := range []struct {
		resp presenters.ElicitationResponse
		tail []string
	}{
		{presenters.ElicitationResponse{Action: presenters.ElicitationAccept, Content: map[string]any{"name": "Ada", "age": 36}},
			[]string{`ELICITATION_RESOLVED accept by user ""`, `STATUS generating`, `DELTA assistant A "elicitation: accept {\"age\":36,\"name\":\"Ada\"}"`}},
		// Content with anything but accept does not reach the agent.
		{presenters.ElicitationResponse{Action: presenters.ElicitationDecline, Content: map[string]any{"name": "x"}},
			[]string{`ELICITATION_RESOLVED decline by user ""`, `STATUS generating`, `DELTA assistant A "elicitation: decline"`}},
		{presenters.ElicitationResponse{Action: presenters.ElicitationCancel},
			[]string{`ELICITATION_RESOLVED cancel by user ""`, `STATUS generating`, `DELTA assistant A "elicitation: cancel"`}},
	} {
		t.Run(string(tc.resp.Action), func(t *testing.T) {
			res, from := h.send(p, s.SessionID, "ask me")
			req := h.elicitationRequired(s.SessionID, from)
			if req.Mode != presenters.ElicitationForm || req.ToolID != "t1" || req.MessageID != res.MessageID || req.Message != "Who are you?" ||
				!reflect.DeepEqual(req.RequestedSchema["required"], []any{"name"}) || req.RequestedSchema["properties"] == nil {
				t.Fatalf("elicitation %+v", req)
			}
			info, err := p.GetSession(testContext(t), s.SessionID)
			if err != nil || info.Status != presenters.SessionPaused || len(info.PendingElicitations) != 1 || info.PendingElicitations[0].ElicitationID != req.ElicitationID {
				t.Fatalf("while waiting: %v, status %s, pending %+v", err, info.Status, info.PendingElicitations)
			}
			tc.resp.ElicitationID = req.ElicitationID
			if err := p.RespondElicitation(testContext(t), s.SessionID, tc.resp); err != nil {
				t.Fatal(err)
			}
			if err := p.RespondElicitation(testContext(t), s.SessionID, tc.resp); !errors.Is(err, presenters.ErrNotFound) {
				t.Fatalf("second answer: %v, want ErrNotFound", err)
			}
			got := afterPreamble(t, h.finish(s.SessionID, res, from))
			want := append([]string{`ELICITATION_REQUIRED form t1 "Who are you?"`, `STATUS paused`}, tc.tail...)
			want = append(want, `END assistant A end_turn`, `STATUS idle`)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("events:\n got %q\nwant %q", got, want)
			}
			if info, _ := p.GetSession(testContext(t), s.SessionID); len(info.PendingElicitations) != 0 {
				t.Fatalf("after the turn: pending %+v", info.PendingElicitations)
			}
		})
	}
}

func TestElicitationNobodyAnswersInTime(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(formScript)
	cfg.PermissionTimeout = 50 * time.Millisecond
	p := h.presenter(cfg)
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "ask me")
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	want := []string{
		`ELICITATION_REQUIRED form t1 "Who are you?"`, `STATUS paused`,
		`ELICITATION_RESOLVED cancel by cancelled "nobody answered within 50ms"`, `STATUS generating`,
		`DELTA assistant A "elicitation: cancel"`, `END assistant A end_turn`, `STATUS idle`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
}

func TestElicitationCancelledWithItsTurn(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"elicit": {"message": "Name?"}}, {"waitCancel": true}, {"stop": "cancelled"}]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "ask me")
	req := h.elicitationRequired(s.SessionID, from)
	if _, err := p.CancelMessage(testContext(t), s.SessionID, res.MessageID); err != nil {
		t.Fatal(err)
	}
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	if len(got) < 3 || got[0] != `ELICITATION_REQUIRED form  "Name?"` || got[2] != `ELICITATION_RESOLVED cancel by cancelled "the turn was cancelled"` {
		t.Fatalf("events %q: want the elicitation resolved cancelled by the turn's cancel", got)
	}
	if err := p.RespondElicitation(testContext(t), s.SessionID, presenters.ElicitationResponse{ElicitationID: req.ElicitationID, Action: presenters.ElicitationAccept}); !errors.Is(err, presenters.ErrNotFound) {
		t.Fatalf("answer after the cancel: %v, want ErrNotFound", err)
	}
}

// Two clients answer at once: exactly one answer resolves the elicitation, the other
// gets ErrNotFound, and the agent gets the winner's answer.
func TestElicitationFirstAnswerWins(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(formScript))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "ask me")
	req := h.elicitationRequired(s.SessionID, from)
	answers := []presenters.ElicitationResponse{
		{ElicitationID: req.ElicitationID, Action: presenters.ElicitationAccept, Content: map[string]any{"name": "one"}},
		{ElicitationID: req.ElicitationID, Action: presenters.ElicitationDecline},
	}
	errs := make([]error, len(answers))
	var wg sync.WaitGroup
	for i, a := range answers {
		wg.Go(func() { errs[i] = p.RespondElicitation(testContext(t), s.SessionID, a) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case !errors.Is(err, presenters.ErrNotFound):
			t.Fatalf("answers: %v, want one nil and one ErrNotFound", errs)
		}
	}
	if winner < 0 {
		t.Fatalf("answers: %v, want one to win", errs)
	}
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	var resolved, said []string
	for _, line := range got {
		switch {
		case len(line) > 20 && line[:20] == "ELICITATION_RESOLVED":
			resolved = append(resolved, line)
		case len(line) > 5 && line[:5] == "DELTA":
			said = append(said, line)
		}
	}
	wantSaid := map[int]string{0: `DELTA assistant A "elicitation: accept {\"name\":\"one\"}"`, 1: `DELTA assistant A "elicitation: decline"`}[winner]
	if len(resolved) != 1 || !reflect.DeepEqual(said, []string{wantSaid}) {
		t.Fatalf("events %q: want one resolution and the agent saying %s", got, wantSaid)
	}
}

func TestElicitationURLCompletedByTheAgent(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"elicit": {"mode": "url", "message": "Log in", "url": "https://example.com/login", "id": "e-7", "completeAfter": "100ms"}}]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "log in")
	req := h.elicitationRequired(s.SessionID, from)
	if req.Mode != presenters.ElicitationURL || req.URL != "https://example.com/login" || req.RequestedSchema != nil {
		t.Fatalf("elicitation %+v", req)
	}
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	want := []string{
		`ELICITATION_REQUIRED url  "Log in"`, `STATUS paused`,
		`ELICITATION_RESOLVED accept by agent "the agent reported the URL step complete"`, `STATUS generating`,
		`DELTA assistant A "elicitation: accept"`, `END assistant A end_turn`, `STATUS idle`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
}

func TestElicitationScopeReachesTheSDK(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"sessionId":"s1","toolCallId":"t9","mode":"form","message":"m","requestedSchema":{"type":"object","properties":{}},"_meta":{"keep":1,"agenticd/elicitationScope":{"sessionId":"forged"}}}}` + "\n")
	var req struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(withElicitationScope(line), &req); err != nil {
		t.Fatal(err)
	}
	if got := scopeOf(req.Params.Meta); got != (elicitationScope{SessionID: "s1", ToolCallID: "t9"}) || req.Params.Meta["keep"] != 1.0 {
		t.Fatalf("_meta %v: want the request's own scope beside the agent's keys", req.Params.Meta)
	}
	for _, other := range []string{
		`{"jsonrpc":"2.0","id":3,"result":{"text":"elicitation/create"}}` + "\n",
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1"}}` + "\n",
	} {
		if got := string(withElicitationScope([]byte(other))); got != other {
			t.Fatalf("%s became %s", other, got)
		}
	}
}
