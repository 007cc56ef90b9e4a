package store

import (
	"context"
	"reflect"
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

// An error's answer comes back as kept (its status, no response); expired answers are
// deleted by a save once pruneAnswersEvery has passed since the last deletion.
func TestRequestAnswerErrorsAndPruning(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		now := time.Unix(1_700_000_000, 0)
		failed := RequestAnswer{RequestID: "failed", Method: "/m", Fingerprint: []byte{2}, Status: []byte("status"), ExpiresUnixNano: now.Add(time.Minute).UnixNano()}
		if err := s.SaveRequestAnswer(ctx, failed, now); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.LookupRequestAnswer(ctx, "failed", now)
		if err != nil || !ok || !reflect.DeepEqual(got, failed) {
			t.Fatalf("the error's answer read back as %+v, %v, %v; want %+v", got, ok, err, failed)
		}
		later := now.Add(pruneAnswersEvery + time.Minute)
		fresh := RequestAnswer{RequestID: "fresh", Method: "/m", Fingerprint: []byte{3}, Response: []byte{}, ExpiresUnixNano: later.Add(time.Minute).UnixNano()}
		if err := s.SaveRequestAnswer(ctx, fresh, later); err != nil {
			t.Fatal(err)
		}
		var ids []string
		if err := s.db.Raw(`SELECT request_id FROM request_answers`).Scan(&ids).Error; err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 || ids[0] != "fresh" {
			t.Errorf("kept answers after a save past the expiry: %v; want only fresh", ids)
		}
	})
}
