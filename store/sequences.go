package store

import (
	"context"
	"fmt"
	"math"
)

// ReserveSequences hands out the n event sequences first..first+n-1, exclusively: of
// several processes sharing the database, no two reservations overlap, and each is above
// every earlier one. It raises the sequence floor by n in one statement, which locks the
// floor's row (creating it if missing), so racing reservations queue; it counts from the
// event log's newest sequence when that is above the floor, so it never hands out a
// sequence a hub that kept no floor may have logged.
func (s *Store) ReserveSequences(ctx context.Context, n uint64) (first uint64, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if n == 0 || n > math.MaxInt64/2 {
		return 0, fmt.Errorf("reserve %d event sequences: the count must be between 1 and 2^62", n)
	}
	const logNewest = `(SELECT COALESCE(MAX(sequence), 0) FROM event_log)`
	query := s.dialect.rebind(`INSERT INTO event_sequence_floor (id, floor) VALUES (1, ` + logNewest + ` + ?)
		ON CONFLICT (id) DO UPDATE SET floor = ` + s.dialect.greatest() + `(event_sequence_floor.floor + ?, excluded.floor)
		RETURNING floor`)
	var floor int64
	if err := s.writeRow(ctx, query, []any{int64(n), int64(n)}, &floor); err != nil {
		return 0, fmt.Errorf("reserve %d event sequences: %w", n, err)
	}
	return uint64(floor) - n + 1, nil
}
