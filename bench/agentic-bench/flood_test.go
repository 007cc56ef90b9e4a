package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// The per-subscriber row compares with the bare SDK's median rate over its intact runs
// and the runs it broke in (up to the break), else with the raw reader; met follows the
// ratio shown first (the target is 0.8 × the baseline).
func TestFloodRowsBaselineChoice(t *testing.T) {
	const count = 50_000
	broken := func(handled int, elapsed time.Duration) turnResult {
		return turnResult{elapsed: elapsed, err: errors.New("prompt (connection lost?): peer disconnected"), handledBeforeBreak: handled}
	}
	agenticd := func(seconds float64) *serverRuns {
		return &serverRuns{total: 1, slowest: []float64{seconds}, fastest: []float64{seconds}}
	}
	raw := &baselineRuns{name: "raw reader"}
	raw.add(turnResult{elapsed: time.Second}) // 50k ev/s

	for _, tc := range []struct {
		name      string
		bare      []turnResult
		seconds   float64 // agenticd's slowest subscriber
		wantRatio string
		wantMet   string
	}{
		{"intact bare run", []turnResult{{elapsed: 2 * time.Second}}, 2.4, "0.83 × bare SDK (25.0k ev/s, median of 1 run(s): 1 intact); 0.42 × raw reader", "yes"},
		{"under the target", []turnResult{{elapsed: 2 * time.Second}}, 3, "0.67 × bare SDK (25.0k ev/s, median of 1 run(s): 1 intact); 0.33 × raw reader", "no"},
		{"bare runs cut short", []turnResult{broken(10_000, 250*time.Millisecond), broken(6_000, 200*time.Millisecond), broken(-1, time.Second), broken(0, time.Second)},
			3, "0.48 × bare SDK (35.0k ev/s, median of 2 run(s): 0 intact, 2 until its connection broke (after 10000, 6000 chunks))", "no"},
		{"intact and broken runs", []turnResult{{elapsed: 2500 * time.Millisecond}, broken(6_000, 200*time.Millisecond), {elapsed: time.Second}},
			2, "0.83 × bare SDK (30.0k ev/s, median of 3 run(s): 2 intact, 1 until its connection broke (after 6000 chunks))", "yes"},
		{"no bare run to measure", []turnResult{broken(-1, time.Second)}, 1.2, "bare SDK: no run to measure; 0.83 × raw reader (50.0k ev/s), standing in for it", "yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bare := &baselineRuns{name: "bare SDK"}
			for _, r := range tc.bare {
				bare.add(r)
			}
			rows := floodRows("ACP flood", count, 64, 16, ", one gRPC connection each", false, raw, bare, agenticd(tc.seconds), nil)
			if len(rows) == 0 {
				t.Fatal("no rows")
			}
			row := rows[0]
			if !strings.HasPrefix(row.Ratio, tc.wantRatio) || row.Met != tc.wantMet {
				t.Errorf("ratio %q met %q; want ratio starting %q, met %q", row.Ratio, row.Met, tc.wantRatio, tc.wantMet)
			}
		})
	}
}

// The bare client stops feeding its check at stop(), and reports what it had taken in
// order: the count a broken run's rate is made of.
func TestSDKClientStop(t *testing.T) {
	stamped := func(i int) sdk.SessionNotification {
		text := fmt.Sprintf("%08d|%019d|", i, time.Now().UnixNano())
		return sdk.SessionNotification{Update: sdk.UpdateAgentMessageText(text + strings.Repeat("x", 64-len(text)))}
	}
	c := &sdkClient{check: newChunkCheck(64, 10)}
	for i := range 3 {
		if err := c.SessionUpdate(t.Context(), stamped(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.stop(); got != 3 {
		t.Fatalf("stop() = %d, want 3 chunks", got)
	}
	if err := c.SessionUpdate(t.Context(), stamped(3)); err != nil {
		t.Fatal(err)
	}
	if c.check.next != 3 || c.updates.Load() != 4 {
		t.Fatalf("after stop: check at chunk %d, %d updates; want 3 and 4", c.check.next, c.updates.Load())
	}
	out := &sdkClient{check: newChunkCheck(64, 10)}
	_ = out.SessionUpdate(t.Context(), stamped(1))
	if got := out.stop(); got != -1 {
		t.Fatalf("stop() after a chunk out of order = %d, want -1", got)
	}
}
