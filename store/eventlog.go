package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// LoggedEvent is one row of the event log: an event as its subscribers got it (Data, the
// encoded AgenticEvent) with the columns the log is searched by.
type LoggedEvent struct {
	Sequence  uint64
	SessionID string // empty for an agent's event
	AgentID   string
	// Type is the presenters.EventType of the event's payload, whose numbers are those of
	// AgenticEventType in the proto (1 SESSION_CREATED ... 16 AGENT_STATUS_CHANGED).
	Type      int
	MessageID string // the message the event belongs to; empty if none
	Time      time.Time
	Data      []byte
}

// EventFilter chooses logged events; an empty list matches everything, and an event must
// match every list that is set.
type EventFilter struct {
	SessionIDs []string
	AgentIDs   []string
	Types      []int
}

// The store keeps a prepared INSERT for each power of two of rows up to appendRows
// (appendSizes of them), the most one statement of AppendEvents carries: 7 bound values
// each, well under SQLite's limit on the values of a statement.
const (
	appendSizes = 9
	appendRows  = 1 << (appendSizes - 1)
)

// appendChunk is how many of n events the next statement inserts, and which of the
// prepared statements does it: the largest power of two up to n and appendRows, so a
// batch takes one statement per bit of its size beyond whole appendRows chunks.
func appendChunk(n int) (rows, k int) {
	k = bits.Len(uint(min(n, appendRows))) - 1
	return 1 << k, k
}

// AppendEvents writes a batch in one transaction (group commit). The sequences must be
// new: one already logged fails the whole batch.
func (s *Store) AppendEvents(ctx context.Context, batch []LoggedEvent) error {
	_, err := s.AppendFenced(ctx, batch, nil, "")
	return err
}

// AppendFenced writes a batch of events and the audit entries made from them in one
// transaction: an entry is stored if and only if its event is. For a replica (replica
// set, on Postgres) the events of a session whose lease row names another replica (held
// now, or released by it), and their audit entries, are not written, since that replica
// took the session over and this one's events of it are stale. It returns those sessions. The batch's
// lease rows stay locked until it commits, so no take-over lands between the check and
// the write.
func (s *Store) AppendFenced(ctx context.Context, batch []LoggedEvent, audit []AuditEntry, replica string) (fenced []string, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if len(batch) == 0 {
		return nil, nil
	}
	fenced, err = s.appendEvents(ctx, batch, audit, replica)
	if err != nil {
		return nil, fmt.Errorf("append %d events (sequences %d to %d) to the event log: %w", len(batch), batch[0].Sequence, batch[len(batch)-1].Sequence, err)
	}
	return fenced, nil
}

// appendEvents inserts the batch in one transaction: full chunks of appendRows through
// the prepared statement, the rest through one statement of its own.
func (s *Store) appendEvents(ctx context.Context, batch []LoggedEvent, audit []AuditEntry, replica string) (fenced []string, err error) {
	defer s.observeWrite("event_log_append", time.Now())
	unlock, err := s.lockUnshared(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	tx, err := s.sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var sessions []string // the batch's distinct session ids: fencing and notifying use them
	if s.dialect == postgresDialect {
		sessions = batchSessions(batch)
	}
	if replica != "" && s.dialect == postgresDialect {
		if fenced, err = heldElsewhere(ctx, tx, sessions, replica); err != nil {
			return nil, err
		}
		if len(fenced) > 0 {
			gone := make(map[string]bool, len(fenced))
			for _, id := range fenced {
				gone[id] = true
			}
			batch = slices.DeleteFunc(slices.Clone(batch), func(ev LoggedEvent) bool { return gone[ev.SessionID] })
			audit = slices.DeleteFunc(slices.Clone(audit), func(e AuditEntry) bool { return gone[e.SessionID] })
			sessions = slices.DeleteFunc(sessions, func(id string) bool { return gone[id] })
			if len(batch) == 0 {
				return fenced, tx.Commit()
			}
		}
	}
	// Listeners on other connections hear of the batch when it commits.
	if s.dialect == postgresDialect {
		if err := notifyEvents(ctx, tx, sessions); err != nil {
			return nil, err
		}
	}
	// A replica's batch may be tried again after a commit whose answer the connection lost
	// (a restart, a cut): its sequences are its own (reserved blocks), so one already
	// logged can only be that batch, which is then left as it landed, audit included.
	again := replica != "" && s.dialect == postgresDialect
	var inserted int64
	var onTx [appendSizes]*sql.Stmt // the prepared statements on tx's connection, as used
	args := make([]any, 0, 7*min(len(batch), appendRows))
	for rest := batch; len(rest) > 0; {
		n, k := appendChunk(len(rest))
		rows := rest[:n]
		rest = rest[n:]
		args = args[:0]
		for _, ev := range rows {
			data := ev.Data
			if data == nil {
				data = []byte{} // NOT NULL: an empty event is an empty blob
			}
			args = append(args, int64(ev.Sequence), ev.SessionID, ev.AgentID, ev.Type, ev.MessageID, ev.Time.UnixNano(), data)
		}
		var res sql.Result
		switch {
		case again:
			res, err = tx.ExecContext(ctx, s.dialect.rebind(appendEventsSQL(len(rows)))+` ON CONFLICT (sequence) DO NOTHING`, args...)
		default:
			if onTx[k] == nil {
				onTx[k] = tx.StmtContext(ctx, s.appendEventsStmts[k])
			}
			_, err = onTx[k].ExecContext(ctx, args...)
		}
		if err != nil {
			return nil, err
		}
		if again {
			n, err := res.RowsAffected()
			if err != nil {
				return nil, err
			}
			inserted += n
		}
	}
	if again && inserted == 0 {
		return fenced, tx.Commit() // the batch landed before
	}
	if err := s.appendAudit(ctx, tx, audit); err != nil {
		return nil, err
	}
	return fenced, tx.Commit()
}

// batchSessions is the distinct session ids of a batch, in the order they first come
// ("" for an agent's events).
func batchSessions(batch []LoggedEvent) []string {
	seen := make(map[string]bool)
	var ids []string
	for _, ev := range batch {
		if !seen[ev.SessionID] {
			seen[ev.SessionID] = true
			ids = append(ids, ev.SessionID)
		}
	}
	return ids
}

// heldElsewhere returns the sessions of the batch whose lease row names another replica.
// It locks every lease row of the batch until tx ends (Postgres), its own included: a
// take-over of one of them, which must update that row, waits for the batch, and so
// comes after it. The rows are locked in session order; a renewal may lock some of them
// in another order, and Postgres then ends one of the two (the log writer tries a
// failed batch again, a failed renewal is retried at the next tick).
func heldElsewhere(ctx context.Context, tx *sql.Tx, sessions []string, replica string) ([]string, error) {
	ids := slices.DeleteFunc(slices.Clone(sessions), func(id string) bool { return id == "" }) // agent events have no lease
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT session_id, replica FROM session_leases WHERE session_id = ANY($1) ORDER BY session_id FOR SHARE`, ids)
	if err != nil {
		return nil, fmt.Errorf("check the batch's session leases: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var held []string
	for rows.Next() {
		var id, holder string
		if err := rows.Scan(&id, &holder); err != nil {
			return nil, err
		}
		if holder != replica {
			held = append(held, id)
		}
	}
	return held, rows.Err()
}

// appendEventsSQL is an INSERT of n events.
func appendEventsSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO event_log (sequence, session_id, agent_id, type, message_id, time, data) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("(?,?,?,?,?,?,?)")
	}
	return b.String()
}

// agentAndTypeConditions is the SQL of the filter's agents and types, each an " AND ..."
// to follow a WHERE, and its arguments.
func (f EventFilter) agentAndTypeConditions() (string, []any) {
	var cond strings.Builder
	var args []any
	if len(f.AgentIDs) > 0 {
		cond.WriteString(` AND agent_id IN ?`)
		args = append(args, f.AgentIDs)
	}
	if len(f.Types) > 0 {
		cond.WriteString(` AND type IN ?`)
		args = append(args, f.Types)
	}
	return cond.String(), args
}

const loggedEventColumns = `sequence, session_id, agent_id, type, message_id, time, data`

// ReadEvents returns up to limit logged events with a sequence in (after, until], oldest
// first, that match the filter. until 0 is no upper bound, nor is a limit of 0 or less.
func (s *Store) ReadEvents(ctx context.Context, after, until uint64, f EventFilter, limit int) (_ []LoggedEvent, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var where strings.Builder
	where.WriteString(`sequence > ?`)
	args := []any{int64(after)}
	if until != 0 {
		where.WriteString(` AND sequence <= ?`)
		args = append(args, int64(until))
	}
	if len(f.SessionIDs) > 0 {
		where.WriteString(` AND session_id IN ?`)
		args = append(args, f.SessionIDs)
	}
	cond, condArgs := f.agentAndTypeConditions()
	where.WriteString(cond)
	args = append(args, condArgs...)
	query := `SELECT ` + loggedEventColumns + ` FROM event_log WHERE ` + where.String() + ` ORDER BY sequence`
	if limit > 0 {
		query += ` LIMIT ?`
		args = append(args, limit)
	}
	out, err := s.queryEvents(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read the event log after sequence %d: %w", after, err)
	}
	return out, nil
}

// MessageEvents returns the logged events of one message of a session, oldest first.
// It reads the session's events (event_log_by_session) and keeps the message's: an index
// on message_id cost a fifth of the log's write time in a flood, for a read that runs only
// at start-up after a crash.
func (s *Store) MessageEvents(ctx context.Context, sessionID, messageID string) (_ []LoggedEvent, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if messageID == "" {
		return nil, errors.New("read a message's logged events: empty message id")
	}
	out, err := s.queryEvents(ctx, `SELECT `+loggedEventColumns+` FROM event_log WHERE session_id = ? AND message_id = ? ORDER BY sequence`, sessionID, messageID)
	if err != nil {
		return nil, fmt.Errorf("read the logged events of message %s: %w", messageID, err)
	}
	return out, nil
}

func (s *Store) queryEvents(ctx context.Context, query string, args ...any) ([]LoggedEvent, error) {
	rows, err := s.db.WithContext(ctx).Raw(query, args...).Rows()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []LoggedEvent
	for rows.Next() {
		var (
			ev         LoggedEvent
			seq, nanos int64
		)
		if err := rows.Scan(&seq, &ev.SessionID, &ev.AgentID, &ev.Type, &ev.MessageID, &nanos, &ev.Data); err != nil {
			return nil, err
		}
		ev.Sequence, ev.Time = uint64(seq), time.Unix(0, nanos)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// EventLogRange is the oldest and newest logged sequence (0, 0 when the log is empty).
func (s *Store) EventLogRange(ctx context.Context) (oldest, newest uint64, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var r struct{ Oldest, Newest int64 }
	if err := s.db.WithContext(ctx).Raw(`SELECT COALESCE(MIN(sequence), 0) AS oldest, COALESCE(MAX(sequence), 0) AS newest FROM event_log`).Scan(&r).Error; err != nil {
		return 0, 0, fmt.Errorf("read the event log's range: %w", err)
	}
	return uint64(r.Oldest), uint64(r.Newest), nil
}

// pruneRows is how many rows one transaction of PruneEvents deletes, so that other
// writers (a turn's checkpoints) wait for no more than a few milliseconds at a time.
const pruneRows = 5000

// PruneEvents applies retention: it keeps at most maxEvents events and at most maxBytes of
// their data, and no event older than maxAge (a bound of 0 or less is no bound). It
// deletes the oldest first, so what remains is always the newest part of the log; by age
// it stops at the first event young enough (event times rise with their sequences, but
// for steps of the clock). It returns how many events went.
func (s *Store) PruneEvents(ctx context.Context, maxEvents int64, maxBytes int64, maxAge time.Duration) (_ int64, err error) {
	ctx, done := s.longCall(ctx)
	defer done(&err)
	// keepFrom is the oldest sequence every bound lets stay; the reads happen outside the
	// write lock (WAL readers do not block writers), so they cost the other writers nothing.
	keepFrom, err := s.pruneCutoff(ctx, maxEvents, maxBytes, maxAge)
	if err != nil || keepFrom == 0 {
		return 0, err
	}
	deleted, err := s.deleteBelow(ctx, "event_log", "sequence", int64(keepFrom))
	if err != nil {
		return deleted, fmt.Errorf("prune the event log below sequence %d: %w", keepFrom, err)
	}
	return deleted, nil
}

// deleteBelow deletes the rows of table whose key (an integer primary key) is below
// keepFrom, pruneRows a transaction, and returns how many went.
func (s *Store) deleteBelow(ctx context.Context, table, key string, keepFrom int64) (int64, error) {
	var deleted int64
	for {
		var n int64
		err := s.write(ctx, func(tx *gorm.DB) error {
			res := tx.Exec(`DELETE FROM `+table+` WHERE `+key+` IN (SELECT `+key+` FROM `+table+` WHERE `+key+` < ? ORDER BY `+key+` LIMIT ?)`,
				keepFrom, pruneRows)
			n = res.RowsAffected
			return res.Error
		})
		deleted += n
		if err != nil || n < pruneRows {
			return deleted, err
		}
	}
}

// pruneCutoff is the oldest sequence the retention bounds keep (0: nothing to delete).
func (s *Store) pruneCutoff(ctx context.Context, maxEvents, maxBytes int64, maxAge time.Duration) (uint64, error) {
	db := s.db.WithContext(ctx)
	oldest, newest, err := s.EventLogRange(ctx)
	if err != nil || newest == 0 {
		return 0, err
	}
	var keepFrom int64
	// raise keeps from the sequence query finds, if later; ok is false when it found none.
	raise := func(query string, args ...any) (ok bool, err error) {
		var seq sql.NullInt64
		if err := db.Raw(query, args...).Row().Scan(&seq); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, err
		}
		if seq.Valid {
			keepFrom = max(keepFrom, seq.Int64)
		}
		return seq.Valid, nil
	}
	// Sequences never repeat (gaps are blocks a restart, or another replica, left unused),
	// so a span no longer than maxEvents holds no more; only a longer one needs counting.
	if maxEvents > 0 && newest-oldest+1 > uint64(maxEvents) {
		if _, err := raise(`SELECT sequence FROM event_log ORDER BY sequence DESC LIMIT 1 OFFSET ?`, maxEvents-1); err != nil {
			return 0, fmt.Errorf("count the event log: %w", err)
		}
	}
	// A SQLite file's pages bound the log's data from above; only a larger file needs the
	// sum. Postgres compresses large values, so its sizes bound nothing: it always sums.
	if maxBytes > 0 {
		over := true
		if s.dialect == sqliteDialect {
			var pages, pageSize int64
			if err := db.Raw(`PRAGMA page_count`).Row().Scan(&pages); err != nil {
				return 0, fmt.Errorf("read the database size: %w", err)
			}
			if err := db.Raw(`PRAGMA page_size`).Row().Scan(&pageSize); err != nil {
				return 0, fmt.Errorf("read the database size: %w", err)
			}
			over = pages*pageSize > maxBytes
		}
		if over {
			// The newest event whose data and that of all newer ones pass maxBytes goes,
			// with everything older.
			_, err := raise(`SELECT sequence + 1 FROM (SELECT sequence, SUM(length(data)) OVER (ORDER BY sequence DESC) AS newer FROM event_log) AS sized
				WHERE newer > ? ORDER BY sequence DESC LIMIT 1`, maxBytes)
			if err != nil {
				return 0, fmt.Errorf("sum the event log's size: %w", err)
			}
		}
	}
	if maxAge > 0 {
		// From the oldest up to the first young enough event: only the rows that go are read.
		young, err := raise(`SELECT sequence FROM event_log WHERE time >= ? ORDER BY sequence LIMIT 1`, time.Now().Add(-maxAge).UnixNano())
		if err != nil {
			return 0, fmt.Errorf("find the event log's events older than %s: %w", maxAge, err)
		}
		if !young {
			keepFrom = int64(newest) + 1
		}
	}
	if keepFrom <= int64(oldest) {
		return 0, nil
	}
	return uint64(keepFrom), nil
}
