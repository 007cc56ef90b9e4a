package store

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// Reservations follow one another from the stored floor up, and the floor covers them.
func TestReserveSequences(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		for _, want := range []uint64{1, 11, 21} {
			if first, err := s.ReserveSequences(ctx, 10); err != nil || first != want {
				t.Fatalf("ReserveSequences(10) = %d, %v; want %d", first, err, want)
			}
		}
		if floor, err := s.SequenceFloor(ctx); err != nil || floor != 30 {
			t.Errorf("floor after three blocks of 10 = %d, %v; want 30", floor, err)
		}
		// A floor written by a hub that keeps its own counts too.
		if err := s.SetSequenceFloor(ctx, 100); err != nil {
			t.Fatal(err)
		}
		if first, err := s.ReserveSequences(ctx, 1); err != nil || first != 101 {
			t.Errorf("ReserveSequences(1) above a floor of 100 = %d, %v; want 101", first, err)
		}
		if _, err := s.ReserveSequences(ctx, 0); err == nil {
			t.Error("ReserveSequences(0) succeeded")
		}
	})
}

// The first reservation of a database whose log holds events but no floor starts above
// the log's newest; later ones keep above it.
func TestReserveSequencesAboveTheLog(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustAppend(t, s, logEvents(40, 42, time.Unix(1_700_000_000, 0)))
		if first, err := s.ReserveSequences(ctx, 5); err != nil || first != 43 {
			t.Fatalf("first reservation over a log up to 42 = %d, %v; want 43", first, err)
		}
		mustAppend(t, s, logEvents(100, 100, time.Unix(1_700_000_000, 0)))
		if first, err := s.ReserveSequences(ctx, 5); err != nil || first != 101 {
			t.Errorf("reservation over a log up to 100 = %d, %v; want 101", first, err)
		}
	})
}

// Many reservations at once, through two stores on one database (two processes), never
// overlap.
func TestReserveSequencesConcurrently(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		a, b := e.openReplicaStores(t)
		const goroutines, each, block = 16, 20, 7
		var (
			mu     sync.Mutex
			firsts []uint64
			wg     sync.WaitGroup
		)
		for g := range goroutines {
			s := a
			if g%2 == 1 {
				s = b
			}
			wg.Go(func() {
				for range each {
					first, err := s.ReserveSequences(context.Background(), block)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					firsts = append(firsts, first)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.Sort(firsts)
		if len(firsts) != goroutines*each {
			t.Fatalf("%d reservations, want %d", len(firsts), goroutines*each)
		}
		for i, first := range firsts {
			if want := uint64(1 + i*block); first != want {
				t.Fatalf("reservation %d starts at %d, want %d: blocks overlap or leave holes", i, first, want)
			}
		}
		if floor, err := b.SequenceFloor(context.Background()); err != nil || floor != goroutines*each*block {
			t.Errorf("floor = %d, %v; want %d", floor, err, goroutines*each*block)
		}
	})
}
