package store

import (
	"context"
	"testing"
	"time"
)

// The first answer stands until it expires; then a new one takes the id.
func TestRequestAnswerFirstStandsUntilExpiry(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		now := time.Unix(1_700_000_000, 0)
		save := func(resp string, at time.Time) {
			t.Helper()
			a := RequestAnswer{RequestID: "r", Method: "/m", Fingerprint: []byte{1}, Response: []byte(resp), ExpiresUnixNano: at.Add(time.Minute).UnixNano()}
			if err := s.SaveRequestAnswer(ctx, a, at); err != nil {
				t.Fatal(err)
			}
		}
		save("first", now)
		save("second", now.Add(time.Second))
		if got, ok, err := s.LookupRequestAnswer(ctx, "r", now.Add(time.Second)); err != nil || !ok || string(got.Response) != "first" {
			t.Fatalf("within the ttl: %q, %v, %v; want the first answer", got.Response, ok, err)
		}
		later := now.Add(time.Minute)
		if _, ok, err := s.LookupRequestAnswer(ctx, "r", later); err != nil || ok {
			t.Fatalf("after the ttl: found %v, %v; want none", ok, err)
		}
		save("third", later)
		if got, ok, err := s.LookupRequestAnswer(ctx, "r", later); err != nil || !ok || string(got.Response) != "third" {
			t.Errorf("a new answer after expiry: %q, %v, %v", got.Response, ok, err)
		}
	})
}
