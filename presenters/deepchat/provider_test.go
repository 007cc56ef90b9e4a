package deepchat

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agenticd/agenticd/presenters"
)

// TestProviderTextReachesClientsAsValidUTF8 feeds the presenter bytes that are not
// UTF-8, or UTF-8 cut in odd places, from the provider: every event, the stored history
// and the session's status reason stay valid UTF-8 (protobuf refuses anything else).
func TestProviderTextReachesClientsAsValidUTF8(t *testing.T) {
	cases := []struct {
		name  string
		reply fakeReply
		text  string // the reply's stored text
		code  string // the error, if the turn fails
	}{
		{"error body cut inside a character", fakeReply{status: 400,
			body: `{"error":{"message":"` + strings.Repeat("x", maxProviderDetail-1) + `é and more"}}`}, "", "provider_bad_request"},
		{"error body of bytes that are not UTF-8", fakeReply{status: 401, body: "denied \xff\xfe\xc3"}, "", "provider_unauthorized"},
		{"a stream split inside characters", fakeReply{trickle: true,
			events: []string{textEvent("héllo "), textEvent("wörld 😀"), finishEvent("stop")}}, "héllo wörld 😀", ""},
		{"invalid bytes and a lone surrogate in the JSON", fakeReply{
			events: []string{`{"choices":[{"index":0,"delta":{"content":"a` + "\xff" + `b\ud800c"}}]}`, finishEvent("stop")}},
			"a\uFFFDb\uFFFDc", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			info := h.createSession("")
			h.llm.script(tc.reply)
			_, end := h.turn(info.SessionID, "hi")
			for _, ev := range h.rec.all() {
				if !validPayload(ev.Payload) {
					t.Errorf("%s carries invalid UTF-8: %+v", describe(ev), ev.Payload)
				}
			}
			msgs := h.messages(info.SessionID)
			text := ""
			for _, b := range msgs[1].Blocks {
				text += b.Text
				if b.Error != nil && (!utf8.ValidString(b.Error.Message) || b.Error.Code != tc.code) {
					t.Errorf("stored error block %+v", b.Error)
				}
			}
			if text != tc.text {
				t.Errorf("stored text %q, want %q", text, tc.text)
			}
			got, _ := h.p.GetSession(context.Background(), info.SessionID)
			if !utf8.ValidString(got.StatusReason) {
				t.Errorf("status reason %q", got.StatusReason)
			}
			if tc.code == "" && end.StopReason != presenters.StopEndTurn || tc.code != "" && end.StopReason != presenters.StopError {
				t.Errorf("end = %+v", end)
			}
			if tc.code != "" && !strings.Contains(got.StatusReason, "HTTP 40") {
				t.Errorf("status reason %q does not quote the failure", got.StatusReason)
			}
		})
	}
}

func validPayload(p presenters.Payload) bool {
	switch p := p.(type) {
	case presenters.ErrorPayload:
		return utf8.ValidString(p.Message) && utf8.ValidString(p.Code)
	case presenters.MessageDeltaPayload:
		return utf8.ValidString(p.Text)
	case presenters.MessageBlockPayload:
		return utf8.ValidString(p.Block.Text) && (p.Block.Error == nil || utf8.ValidString(p.Block.Error.Message))
	case presenters.StatusChangedPayload:
		return utf8.ValidString(p.Reason)
	}
	return true
}

// TestErrorEventsKeepInternalsInTheLog: the ERROR event says what happened and what to
// do, naming the provider by host only; the base URL's credentials and path, network
// errors and database errors go to the log, with the session id.
func TestErrorEventsKeepInternalsInTheLog(t *testing.T) {
	t.Run("provider unreachable", func(t *testing.T) {
		h := newHarness(t, func(h *harness) { h.cfg.BaseURL = "http://agent:s3cret@127.0.0.1:1/private/v1" })
		info := h.createSession("")
		_, end := h.turn(info.SessionID, "hi")
		errs := ofType[presenters.ErrorPayload](h.rec.all())
		if end.StopReason != presenters.StopError || len(errs) != 1 || errs[0].Code != "provider_unavailable" || !errs[0].Retryable {
			t.Fatalf("end %+v, errors %+v", end, errs)
		}
		msg := errs[0].Message
		if !strings.Contains(msg, "127.0.0.1:1") || !strings.Contains(msg, "check that it is running") {
			t.Fatalf("message %q should name the host and what to do", msg)
		}
		for _, internal := range []string{"s3cret", "agent:", "/private", "dial", "refused", "tcp"} {
			if strings.Contains(msg, internal) {
				t.Errorf("message %q shows %q", msg, internal)
			}
		}
		logs := h.logs.String()
		if !strings.Contains(logs, "connection refused") || !strings.Contains(logs, "session_id="+info.SessionID) ||
			!strings.Contains(logs, "agent_id=deepchat.fake.test") {
			t.Fatalf("the log lacks the detail: %s", logs)
		}
	})
	t.Run("history not saved", func(t *testing.T) {
		h := newHarness(t)
		info := h.createSession("")
		// Every update of a stored message fails: the reply's write is tried again, and
		// the turn waits for it, until a shutdown gives it up.
		err := h.db.Exec(`CREATE TRIGGER refuse_message_updates BEFORE UPDATE ON messages
			BEGIN SELECT RAISE(ABORT, 'internal table detail'); END`).Error
		if err != nil {
			t.Fatal(err)
		}
		h.llm.script(textReply("answer"))
		res := h.send(info.SessionID, "hi")
		for deadline := time.Now().Add(waitLimit); strings.Count(h.logs.String(), "trying again") < 2; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the reply's write was not tried again; log:\n%s", h.logs.String())
			}
		}
		if slices.ContainsFunc(h.rec.all(), isEnd(res.MessageID)) {
			t.Fatal("MESSAGE_END was sent while the reply could not be stored")
		}
		if err := h.p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.waitEnd(res.MessageID)
		errs := ofType[presenters.ErrorPayload](h.rec.all())
		if len(errs) != 1 || errs[0].Code != "storage_failed" || strings.Contains(errs[0].Message, "internal table detail") ||
			!strings.Contains(errs[0].Message, "data directory") {
			t.Fatalf("errors = %+v", errs)
		}
		if logs := h.logs.String(); !strings.Contains(logs, "internal table detail") || !strings.Contains(logs, "session_id="+info.SessionID) {
			t.Fatalf("the log lacks the detail: %s", logs)
		}
	})
}

// TestAllowAlwaysOnAScriptDoesNotAllowInlineCode: "always allow" for `python3 x.py`
// must not let `python3 -c ...` run unasked.
func TestAllowAlwaysOnAScriptDoesNotAllowInlineCode(t *testing.T) {
	h := newHarness(t)
	h.writeFile("x.py", "print('x')\n")
	info := h.createSession(ModeBalanced)
	h.llm.script(
		toolReply("call_1", "run_command", `{"command":"python3 x.py"}`),
		toolReply("call_2", "run_command", `{"command":"python3 -c 'import os'"}`),
		textReply("done"),
	)
	res := h.send(info.SessionID, "run")
	first := h.rec.waitFor(t, "first request", isPermissionRequired).Payload.(presenters.PermissionRequiredPayload).Request
	h.respond(info.SessionID, first.RequestID, OptionAllowAlways)
	second := h.rec.waitFor(t, "a request for the inline code", func(ev presenters.Event) bool {
		p, ok := ev.Payload.(presenters.PermissionRequiredPayload)
		return ok && p.Request.ToolID == "call_2" || isEnd(res.MessageID)(ev)
	})
	req, ok := second.Payload.(presenters.PermissionRequiredPayload)
	if !ok {
		t.Fatal("python3 -c ran under the allow-always answer given for python3 x.py")
	}
	if req.Request.CommandInfo.RiskLevel != presenters.RiskHigh || req.Request.CommandInfo.Signature != "python3 -c" {
		t.Fatalf("command info = %+v", req.Request.CommandInfo)
	}
	h.respond(info.SessionID, req.Request.RequestID, OptionRejectOnce)
	h.waitEnd(res.MessageID)
}

// A provider's zero is a count it reported; a count it left out is not reported.
func TestProviderUsageTellsZeroFromAbsent(t *testing.T) {
	for _, tc := range []struct {
		wire                                    string
		input, output, total, cached, reasoning *int64
		contextUsed                             *int64
	}{
		{wire: `{"prompt_tokens": 0, "completion_tokens": 5}`, input: n(0), output: n(5), total: n(5), contextUsed: n(5)},
		{wire: `{"completion_tokens": 5, "total_tokens": 9}`, output: n(5), total: n(9)},
		{wire: `{"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5, "prompt_tokens_details": {"cached_tokens": 0},
			"completion_tokens_details": {"reasoning_tokens": 0}}`, input: n(4), output: n(1), total: n(5), cached: n(0), reasoning: n(0), contextUsed: n(5)},
		{wire: `{"prompt_tokens": 4, "completion_tokens": 1, "prompt_cache_hit_tokens": 3, "prompt_tokens_details": {"cached_tokens": 0}}`,
			input: n(4), output: n(1), total: n(5), cached: n(3), contextUsed: n(5)},
	} {
		var w wireUsage
		if err := json.Unmarshal([]byte(tc.wire), &w); err != nil {
			t.Fatal(err)
		}
		u := w.usage()
		for _, c := range []struct {
			name      string
			got, want *int64
		}{{"input", u.InputTokens, tc.input}, {"output", u.OutputTokens, tc.output}, {"total", u.TotalTokens, tc.total},
			{"cached", u.CachedInputTokens, tc.cached}, {"reasoning", u.ReasoningTokens, tc.reasoning}, {"context used", u.ContextUsed, tc.contextUsed}} {
			if (c.got == nil) != (c.want == nil) || c.got != nil && *c.got != *c.want {
				t.Errorf("%s: %s = %v, want %v", tc.wire, c.name, show(c.got), show(c.want))
			}
		}
	}
}

func n(v int64) *int64 { return &v }

func show(v *int64) string {
	if v == nil {
		return "not reported"
	}
	return strconv.FormatInt(*v, 10)
}

// The turn's trace reaches the provider: its requests carry the W3C traceparent of the
// span the SendMessage call's context holds, so an LLM proxy can continue the trace.
func TestProviderRequestsCarryTheTurnsTrace(t *testing.T) {
	h := newHarness(t)
	info := h.createSession("")
	h.llm.script(fakeReply{events: []string{textEvent("hi"), finishEvent("stop")}})
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "invoke_agent")
	defer span.End()
	res, err := h.p.SendMessage(ctx, info.SessionID, presenters.TextContent("hello"), presenters.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.waitEnd(res.MessageID)
	reqs := h.llm.requestsSoFar()
	if len(reqs) != 1 || !strings.Contains(reqs[0].traceparent, span.SpanContext().TraceID().String()) {
		t.Fatalf("provider requests %+v; want one with the turn's trace id %s", reqs, span.SpanContext().TraceID())
	}
}
