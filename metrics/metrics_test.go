package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agenticd/agenticd/events"
	"github.com/agenticd/agenticd/presenters"
)

// publish feeds events as the hub does, one second apart from t0.
func publish(m *Metrics, t0 time.Time, evs ...presenters.Event) {
	for i, ev := range evs {
		ev.Sequence = uint64(i + 1)
		ev.Time = t0.Add(time.Duration(i) * time.Second)
		m.Published(ev)
	}
}

func ev(session string, p presenters.Payload) presenters.Event {
	return presenters.Event{SessionID: session, AgentID: "deepchat.test", Payload: p}
}

// A turn is counted at its MESSAGE_END with its stop reason, its duration from its first
// event and its tokens under the session's model; sessions move between statuses.
func TestTurnsTokensAndSessions(t *testing.T) {
	m := New()
	t0 := time.Unix(1000, 0)
	generating, idle := presenters.SessionGenerating, presenters.SessionIdle
	publish(m, t0,
		ev("s1", presenters.SessionCreatedPayload{Session: presenters.SessionInfo{Status: idle, CurrentModelID: "gpt-x"}}),
		ev("s2", presenters.SessionCreatedPayload{Session: presenters.SessionInfo{Status: idle}}),
		ev("s1", presenters.StatusChangedPayload{Status: generating}),                                         // t0+2: the turn starts
		ev("s1", presenters.MessageDeltaPayload{MessageID: "m1", Text: "hi", Role: presenters.RoleAssistant}), // t0+3
		ev("s1", presenters.MessageDeltaPayload{MessageID: "m1", Text: "!", Role: presenters.RoleAssistant}),
		ev("s1", presenters.MessageEndPayload{MessageID: "m1", StopReason: presenters.StopEndTurn, Role: presenters.RoleAssistant,
			Usage: &presenters.TokenUsage{InputTokens: presenters.Reported[int64](12), OutputTokens: presenters.Reported[int64](5)}}), // t0+5
		ev("s1", presenters.SessionUpdatedPayload{Patch: presenters.SessionPatch{Status: &idle}}),
		ev("s2", presenters.SessionUpdatedPayload{Patch: presenters.SessionPatch{Status: &generating}}),
		ev("s2", presenters.SessionClosedPayload{Reason: "bye"}),
	)
	if got := testutil.ToFloat64(m.turns.WithLabelValues("deepchat.test", "end_turn")); got != 1 {
		t.Errorf("turns_total{end_turn} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.tokens.WithLabelValues("deepchat.test", "gpt-x", "input")); got != 12 {
		t.Errorf("input tokens = %v, want 12", got)
	}
	if got := testutil.ToFloat64(m.tokens.WithLabelValues("deepchat.test", "gpt-x", "output")); got != 5 {
		t.Errorf("output tokens = %v, want 5", got)
	}
	if got := testutil.ToFloat64(m.sessions.WithLabelValues("idle")); got != 1 {
		t.Errorf("sessions{idle} = %v, want 1 (s1; s2 closed)", got)
	}
	if got := testutil.ToFloat64(m.sessions.WithLabelValues("generating")); got != 0 {
		t.Errorf("sessions{generating} = %v, want 0", got)
	}
	const want = `
# HELP agenticd_turn_duration_seconds Time from a turn's first event to its MESSAGE_END, by agent.
# TYPE agenticd_turn_duration_seconds histogram
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="0.1"} 0
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="0.25"} 0
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="0.5"} 0
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="1"} 0
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="2.5"} 0
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="5"} 1
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="10"} 1
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="30"} 1
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="60"} 1
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="120"} 1
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="300"} 1
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="600"} 1
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="1800"} 1
agenticd_turn_duration_seconds_bucket{agent_id="deepchat.test",le="+Inf"} 1
agenticd_turn_duration_seconds_sum{agent_id="deepchat.test"} 3
agenticd_turn_duration_seconds_count{agent_id="deepchat.test"} 1
`
	if err := testutil.CollectAndCompare(m.turnDuration, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.eventsPublished); got != 9 {
		t.Errorf("events_published_total = %v, want 9", got)
	}
}

// A replayed MESSAGE_END is history: no turn, no tokens.
func TestReplayIsNotCounted(t *testing.T) {
	m := New()
	end := ev("s1", presenters.MessageEndPayload{MessageID: "old", StopReason: presenters.StopEndTurn,
		Usage: &presenters.TokenUsage{InputTokens: presenters.Reported[int64](7)}})
	end.Replay = true
	publish(m, time.Now(), end)
	if n := testutil.CollectAndCount(m.turns); n != 0 {
		t.Errorf("a replayed turn was counted (%d series)", n)
	}
}

// Permission requests and decisions are counted by outcome and decider; errors by code.
func TestPermissionsAndErrors(t *testing.T) {
	m := New()
	publish(m, time.Now(),
		ev("s1", presenters.PermissionRequiredPayload{Request: presenters.PermissionRequest{RequestID: "p1"}}),
		ev("s1", presenters.PermissionRequiredPayload{Request: presenters.PermissionRequest{RequestID: "p2"}}),
		ev("s1", presenters.PermissionGrantedPayload{RequestID: "p1", DecidedBy: presenters.DecidedByUser}),
		ev("s1", presenters.PermissionDeniedPayload{RequestID: "p2", DecidedBy: presenters.DecidedByPolicy}),
		ev("s1", presenters.ErrorPayload{Code: "agent_crashed"}),
	)
	if got := testutil.ToFloat64(m.permissionAsked.WithLabelValues("deepchat.test")); got != 2 {
		t.Errorf("permission_requests_total = %v, want 2", got)
	}
	for _, c := range []struct{ outcome, by string }{{"granted", "user"}, {"denied", "policy"}} {
		if got := testutil.ToFloat64(m.permissionDecide.WithLabelValues("deepchat.test", c.outcome, c.by)); got != 1 {
			t.Errorf("permission_decisions_total{%s,%s} = %v, want 1", c.outcome, c.by, got)
		}
	}
	if got := testutil.ToFloat64(m.errors.WithLabelValues("deepchat.test", "agent_crashed")); got != 1 {
		t.Errorf("errors_total{agent_crashed} = %v, want 1", got)
	}
}

// An agent's crashes and restarts come from its AGENT_STATUS_CHANGED events; its status
// gauge shows the current status only.
func TestAgentCrashesAndRestarts(t *testing.T) {
	m := New()
	agent := func(s presenters.AgentStatus) presenters.Event {
		return presenters.Event{AgentID: "acp.x.y", Payload: presenters.AgentStatusChangedPayload{Info: presenters.AgentInfo{ID: "acp.x.y", Status: s}}}
	}
	publish(m, time.Now(), agent(presenters.AgentStarting), agent(presenters.AgentReady), agent(presenters.AgentCrashed),
		agent(presenters.AgentStarting), agent(presenters.AgentReady), agent(presenters.AgentReady))
	if got := testutil.ToFloat64(m.agentCrashes.WithLabelValues("acp.x.y")); got != 1 {
		t.Errorf("agent_crashes_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.agentRestarts.WithLabelValues("acp.x.y")); got != 1 {
		t.Errorf("agent_restarts_total = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.agentStatus); n != 1 {
		t.Errorf("agent_status has %d series, want 1 (the current status)", n)
	}
}

type fakeHub struct{ s events.Stats }

func (f fakeHub) Stats() events.Stats { return f.s }

// The handler serves the hub's load read at scrape time, only at /metrics, and only with
// the token when one is set.
func TestHandler(t *testing.T) {
	m := New()
	m.WatchHub(fakeHub{events.Stats{Subscribers: 3, HeldBytes: 4096, Overflows: 2}})
	m.ObserveWrite("event_log_append", 3*time.Millisecond)
	srv := httptest.NewServer(m.Handler("s3cret-token-abcdef", nil))
	defer srv.Close()
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, _ := get("/metrics", "wrong-token-abcdefgh"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	if code, _ := get("/debug/pprof/", "s3cret-token-abcdef"); code != http.StatusNotFound {
		t.Errorf("another path: %d, want 404", code)
	}
	code, body := get("/metrics", "s3cret-token-abcdef")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	for _, want := range []string{
		"agenticd_event_subscribers 3", "agenticd_event_ring_bytes 4096", "agenticd_event_subscriber_overflows_total 2",
		`agenticd_store_write_duration_seconds_count{op="event_log_append"} 1`, "go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}
