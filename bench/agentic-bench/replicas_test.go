package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

func TestLatencyRows(t *testing.T) {
	ok := subLatency{event50: 4.5, event99: 9.25, agent50: 4.6, agent99: 9.3, n: 100}
	runs := []latencyRun{
		{onB: ok, onA: subLatency{event50: 4, event99: 8}, sqlite: subLatency{err: errors.New("no agent")}},
		{onB: subLatency{event50: 5.5, event99: 10.25}, onA: subLatency{event50: 4, event99: 8}, sqlite: subLatency{err: errors.New("no agent")}},
	}
	rows := latencyRows("Replicas", "lat", 1000, 5, runs)
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	if rows[0].Value != "p50 5.00 ms / p99 9.75 ms" || rows[0].Runs != "2/2 intact" {
		t.Errorf("B's row: %+v", rows[0])
	}
	if !strings.Contains(rows[0].Ratio, "subscriber on A (same replica, from the log): p50 4.00 / p99 8.00 ms") || strings.Contains(rows[0].Ratio, "SQLite") {
		t.Errorf("B's comparison: %q", rows[0].Ratio)
	}
	if !strings.HasPrefix(rows[2].Value, "not available: no agent") || rows[2].Met != "n/a" {
		t.Errorf("the failed SQLite reference: %+v", rows[2])
	}
}

func TestFailoverRows(t *testing.T) {
	fig := func(ttl time.Duration, what string) string { return ttl.String() + " " + what }
	failed := failoverRows("Replicas", 3*time.Second, 10*time.Millisecond, 500, fig, []failoverRun{{err: errors.New("no postgres")}})
	if len(failed) != 2 || !strings.HasPrefix(failed[0].Value, "not available: no postgres") || !strings.HasPrefix(failed[1].Value, "not available") {
		t.Fatalf("failed runs: %+v", failed)
	}
	runs := []failoverRun{
		{toSend: 2500 * time.Millisecond, toFirst: 2510 * time.Millisecond, leaseOut: 2480 * time.Millisecond, refusals: map[string]int{"Unavailable SESSION_OWNER_UNAVAILABLE": 3}, ownerLost: true},
		{toSend: 3000 * time.Millisecond, toFirst: 3020 * time.Millisecond, leaseOut: 2970 * time.Millisecond, refusals: map[string]int{"Unavailable SESSION_OWNER_UNAVAILABLE": 2}, ownerLost: true},
		{toSend: 2700 * time.Millisecond, toFirst: 2705 * time.Millisecond, leaseOut: 2680 * time.Millisecond, ownerLost: false},
	}
	rows := failoverRows("Replicas", 3*time.Second, 10*time.Millisecond, 500, fig, runs)
	if rows[0].Value != "2.70 s" || rows[1].Value != "2.71 s" || rows[0].Runs != "3/3" {
		t.Errorf("values: %q %q runs %q", rows[0].Value, rows[1].Value, rows[0].Runs)
	}
	if !strings.Contains(rows[0].Notes, "5 × Unavailable SESSION_OWNER_UNAVAILABLE") || !strings.Contains(rows[0].Notes, "in 2 of 3 runs") {
		t.Errorf("notes: %s", rows[0].Notes)
	}
	if rows[1].Ratio != "10 ms after the successful SendMessage returned (median of the runs' differences)" {
		t.Errorf("ratio: %s", rows[1].Ratio)
	}
}

func TestMessageOf(t *testing.T) {
	for _, ev := range []*pb.AgenticEvent{
		{Payload: &pb.AgenticEvent_MessageDelta{MessageDelta: &pb.MessageDelta{MessageId: "m"}}},
		{Payload: &pb.AgenticEvent_MessageEnd{MessageEnd: &pb.MessageEnd{MessageId: "m"}}},
		{Payload: &pb.AgenticEvent_Error{Error: &pb.ErrorReported{MessageId: "m"}}},
	} {
		if got := messageOf(ev); got != "m" {
			t.Errorf("messageOf(%v) = %q", ev, got)
		}
	}
	if got := messageOf(&pb.AgenticEvent{}); got != "" {
		t.Errorf("an event without a message: %q", got)
	}
}
