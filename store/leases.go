package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
)

// Session leases: of several replicas on one database, the one that serves a session is
// the one whose lease on it has not expired. Expiry is by the database's clock, so the
// replicas' clocks do not matter. A lease row stays until the session is deleted
// (DeleteSession): releasing a lease expires it, and another acquisition overwrites it,
// so the row always names the last replica that held the session.

// ErrLeaseHeld is the error of AcquireLease when another replica's lease on the session
// has not expired.
var ErrLeaseHeld = errors.New("another replica holds the session's lease")

// ErrNoLease is the error of SessionLease for a session no replica holds a lease on.
var ErrNoLease = errors.New("no replica holds the session's lease")

// Lease is a replica's claim to serve a session until Expires.
type Lease struct {
	SessionID string
	Replica   string
	Address   string    // where the replica takes calls
	Expires   time.Time // by the database's clock
	// Expired is whether Expires had passed, by the database's clock, when the lease was
	// read.
	Expired bool
	// Previous is set by AcquireLease when it took over a lapsed lease: the replica that
	// held it, which may have left the session mid-turn (it may be the acquiring replica
	// itself, after a restart). It is empty when the lease was free or is renewed.
	Previous string
}

// nowNanos is the SQL expression of the database's clock in Unix nanoseconds when it is
// evaluated: a statement that waited for a row lock reads the time it got it, not the
// time it started (an expiry computed from the start of a statement that waited would be
// already past when it commits). SQLite's counts milliseconds.
func (d dialect) nowNanos() string {
	if d == postgresDialect {
		return `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000000)::BIGINT`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000000000 AS INTEGER)`
}

// AcquireLease takes the session's lease for the replica at address until ttl from now,
// when it is free, expired or the replica's own (a renewal). When another replica's lease
// has not expired, it returns that lease and an error wrapping ErrLeaseHeld, so that the
// caller can forward to its Address.
func (s *Store) AcquireLease(ctx context.Context, sessionID, replica, address string, ttl time.Duration) (_ Lease, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if sessionID == "" || replica == "" || ttl <= 0 {
		return Lease{}, fmt.Errorf("acquire the lease of session %q for replica %q for %s: the session, the replica and a positive ttl are required", sessionID, replica, ttl)
	}
	now := s.dialect.nowNanos()
	// One statement, so that of replicas racing for a lease exactly one gets it: the
	// conflicting row is locked and the WHERE is checked against its latest version.
	// The expiry of a conflicting row is computed again once its lock is held (after a
	// fenced append that held it commits), not taken from the VALUES.
	acquire := s.dialect.rebind(`INSERT INTO session_leases (session_id, replica, address, expires_at, previous_replica)
		VALUES (?, ?, ?, ` + now + ` + ?, '')
		ON CONFLICT (session_id) DO UPDATE SET
			replica = excluded.replica,
			address = excluded.address,
			expires_at = ` + now + ` + ?,
			previous_replica = CASE WHEN session_leases.replica = excluded.replica AND session_leases.expires_at > ` + now + `
				THEN '' ELSE session_leases.replica END
		WHERE session_leases.replica = excluded.replica OR session_leases.expires_at <= ` + now + `
		RETURNING expires_at, previous_replica`)
	for {
		l := Lease{SessionID: sessionID, Replica: replica, Address: address}
		var expires int64
		err := s.writeRow(ctx, acquire, []any{sessionID, replica, address, ttl.Nanoseconds(), ttl.Nanoseconds()}, &expires, &l.Previous)
		if err == nil {
			l.Expires = time.Unix(0, expires)
			return l, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return Lease{}, fmt.Errorf("acquire the lease of session %s: %w", sessionID, err)
		}
		// Another replica's live lease; unless it went or lapsed since, which another try
		// settles.
		held, err := s.SessionLease(ctx, sessionID)
		switch {
		case err == nil && !held.Expired:
			return held, fmt.Errorf("session %s: %w: replica %s at %s", sessionID, ErrLeaseHeld, held.Replica, held.Address)
		case err != nil && !errors.Is(err, ErrNoLease):
			return Lease{}, err
		}
	}
}

// writeRow runs one write statement that returns a row, and scans it into dest.
func (s *Store) writeRow(ctx context.Context, query string, args []any, dest ...any) error {
	defer s.observeWrite("statement", time.Now())
	unlock, err := s.lockUnshared(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return s.sqlDB.QueryRowContext(ctx, query, args...).Scan(dest...)
}

// lockUnshared takes the write lock for a write that touches none of the store's own
// state (committed), and returns its release. On Postgres it takes nothing: the server
// orders concurrent writers itself, and a lease renewal must not queue behind an append
// stuck on a connection that stopped answering.
func (s *Store) lockUnshared(ctx context.Context) (unlock func(), err error) {
	if s.dialect == postgresDialect {
		return func() {}, nil
	}
	return s.lockWrite(ctx)
}

// writeUnshared is write for a transaction that touches none of the store's own state.
func (s *Store) writeUnshared(ctx context.Context, fn func(tx *gorm.DB) error) error {
	defer s.observeWrite("transaction", time.Now())
	unlock, err := s.lockUnshared(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return s.db.WithContext(ctx).Transaction(fn)
}

// SessionLease returns the session's lease, expired or not; ErrNoLease when there is
// none.
func (s *Store) SessionLease(ctx context.Context, sessionID string) (_ Lease, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	l := Lease{SessionID: sessionID}
	var expires int64
	err = s.sqlDB.QueryRowContext(ctx, s.dialect.rebind(`SELECT replica, address, expires_at, expires_at <= `+s.dialect.nowNanos()+`
		FROM session_leases WHERE session_id = ?`), sessionID).Scan(&l.Replica, &l.Address, &expires, &l.Expired)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, fmt.Errorf("session %s: %w", sessionID, ErrNoLease)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("read the lease of session %s: %w", sessionID, err)
	}
	l.Expires = time.Unix(0, expires)
	return l, nil
}

// RenewLeases extends every lease the replica holds until ttl from now, expired ones too
// as long as no other replica took them and the replica did not give them up: a lease
// that ran out while the database was away is the replica's again when it comes back, so
// an outage alone robs no healthy owner. It returns the sessions whose leases it
// extended.
func (s *Store) RenewLeases(ctx context.Context, replica string, ttl time.Duration) (_ []string, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if ttl <= 0 {
		return nil, fmt.Errorf("renew the leases of replica %s for %s: the ttl must be positive", replica, ttl)
	}
	now := s.dialect.nowNanos()
	var renewed []string
	// A released lease expires at 0 (ReleaseLeases), which no clock reaches.
	err = s.writeUnshared(ctx, func(tx *gorm.DB) error {
		return tx.Raw(`UPDATE session_leases SET expires_at = `+now+` + ? WHERE replica = ? AND expires_at > 0 RETURNING session_id`,
			ttl.Nanoseconds(), replica).Scan(&renewed).Error
	})
	if err != nil {
		return nil, fmt.Errorf("renew the leases of replica %s: %w", replica, err)
	}
	return renewed, nil
}

// ReleaseLeases gives up the replica's leases on the sessions, or all of its leases when
// none are named (on a graceful stop): they expire at once, their rows still naming the
// replica. Leases the replica does not hold stay as they are.
func (s *Store) ReleaseLeases(ctx context.Context, replica string, sessionIDs ...string) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	err = s.writeUnshared(ctx, func(tx *gorm.DB) error {
		// Expired, not deleted: the row keeps naming its last holder, which the fence of
		// another replica's appends reads (AppendFenced).
		if len(sessionIDs) == 0 {
			return tx.Exec(`UPDATE session_leases SET expires_at = 0 WHERE replica = ?`, replica).Error
		}
		for part := range slices.Chunk(sessionIDs, idBatch) {
			if err := tx.Exec(`UPDATE session_leases SET expires_at = 0 WHERE replica = ? AND session_id IN ?`, replica, part).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("release the leases of replica %s: %w", replica, err)
	}
	return nil
}

// LapsedWithUnfinishedWork returns up to limit sessions whose lease has expired (or was
// given up) while they have unfinished work: a reply still in progress (a turn a dead
// replica left running, which another replica should end) or queued messages (which
// another replica should start). Another replica takes such a session over without
// waiting for a call.
func (s *Store) LapsedWithUnfinishedWork(ctx context.Context, limit int) (_ []string, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var ids []string
	err = s.db.WithContext(ctx).Raw(`SELECT l.session_id FROM session_leases l
		WHERE l.expires_at <= `+s.dialect.nowNanos()+`
		AND (EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = l.session_id AND m.status = ?)
			OR EXISTS (SELECT 1 FROM queued_messages q WHERE q.session_id = l.session_id))
		ORDER BY l.expires_at LIMIT ?`, string(StatusInProgress), limit).Scan(&ids).Error
	if err != nil {
		return nil, fmt.Errorf("find lapsed leases of sessions with unfinished work: %w", err)
	}
	return ids, nil
}
