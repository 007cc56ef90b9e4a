package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// AuditEntry is one row of the audit log. Data is the entry as the API encodes it; the
// other fields are what a query filters on. ID is assigned when the entry is appended.
type AuditEntry struct {
	ID        uint64
	Time      time.Time
	Kind      int
	SessionID string
	AgentID   string
	Data      []byte
}

// AuditFilter chooses audit entries; an empty list matches everything, a zero time is no
// bound, and an entry must match every list given.
type AuditFilter struct {
	SessionIDs []string
	AgentIDs   []string
	Kinds      []int
	// Start (inclusive) and End (exclusive) bound the entries' times.
	Start, End time.Time
	// AfterID keeps the entries with a larger id.
	AfterID uint64
	// Reader keeps the entries of the sessions it may read; nil: all.
	Reader *Reader
}

const insertAuditSQL = `INSERT INTO audit_log (time, kind, session_id, agent_id, data) VALUES (?, ?, ?, ?, ?)`

// appendAudit inserts audit entries in the transaction of the events they were made from.
func (s *Store) appendAudit(ctx context.Context, tx *sql.Tx, entries []AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	insert := tx.StmtContext(ctx, s.insertAuditStmt)
	for _, e := range entries {
		data := e.Data
		if data == nil {
			data = []byte{}
		}
		if _, err := insert.ExecContext(ctx, e.Time.UnixNano(), e.Kind, e.SessionID, e.AgentID, data); err != nil {
			return fmt.Errorf("append an audit entry: %w", err)
		}
	}
	return nil
}

// AuditEntries returns up to limit entries matching f, oldest (lowest id) first.
func (s *Store) AuditEntries(ctx context.Context, f AuditFilter, limit int) (_ []AuditEntry, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var (
		where []string
		args  []any
	)
	if f.AfterID > 0 {
		where, args = append(where, "id > ?"), append(args, int64(f.AfterID))
	}
	if !f.Start.IsZero() {
		where, args = append(where, "time >= ?"), append(args, f.Start.UnixNano())
	}
	if !f.End.IsZero() {
		where, args = append(where, "time < ?"), append(args, f.End.UnixNano())
	}
	in := func(column string, n int) {
		where = append(where, column+" IN ("+strings.TrimSuffix(strings.Repeat("?,", n), ",")+")")
	}
	if len(f.SessionIDs) > 0 {
		in("session_id", len(f.SessionIDs))
		for _, id := range f.SessionIDs {
			args = append(args, id)
		}
	}
	if len(f.AgentIDs) > 0 {
		in("agent_id", len(f.AgentIDs))
		for _, id := range f.AgentIDs {
			args = append(args, id)
		}
	}
	if len(f.Kinds) > 0 {
		in("kind", len(f.Kinds))
		for _, k := range f.Kinds {
			args = append(args, k)
		}
	}
	if f.Reader != nil {
		cond, readerArgs := readableBy("session_id", *f.Reader)
		where, args = append(where, cond), append(args, readerArgs...)
	}
	query := `SELECT id, time, kind, session_id, agent_id, data FROM audit_log`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY id"
	if limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.db.WithContext(ctx).Raw(query, args...).Rows()
	if err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []AuditEntry
	for rows.Next() {
		var (
			e         AuditEntry
			id, nanos int64
		)
		if err := rows.Scan(&id, &nanos, &e.Kind, &e.SessionID, &e.AgentID, &e.Data); err != nil {
			return nil, fmt.Errorf("read the audit log: %w", err)
		}
		e.ID, e.Time = uint64(id), time.Unix(0, nanos)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	return out, nil
}

// PruneAudit applies the audit log's retention: at most maxEntries entries and none older
// than maxAge (0 or less: no bound), the oldest going first, in transactions of at most
// pruneRows rows. It returns how many entries went.
func (s *Store) PruneAudit(ctx context.Context, maxEntries int64, maxAge time.Duration) (_ int64, err error) {
	ctx, done := s.longCall(ctx)
	defer done(&err)
	var keepFrom int64 // the lowest id every bound keeps
	db := s.db.WithContext(ctx)
	if maxEntries > 0 {
		var id sql.NullInt64
		if err := db.Raw(`SELECT id FROM audit_log ORDER BY id DESC LIMIT 1 OFFSET ?`, maxEntries-1).Row().Scan(&id); err != nil && err != sql.ErrNoRows {
			return 0, fmt.Errorf("count the audit log: %w", err)
		}
		if id.Valid {
			keepFrom = id.Int64
		}
	}
	if maxAge > 0 {
		var id sql.NullInt64
		if err := db.Raw(`SELECT MIN(id) FROM audit_log WHERE time >= ?`, time.Now().Add(-maxAge).UnixNano()).Row().Scan(&id); err != nil {
			return 0, fmt.Errorf("date the audit log: %w", err)
		}
		if !id.Valid { // every entry is older
			if err := db.Raw(`SELECT COALESCE(MAX(id), 0) + 1 FROM audit_log`).Row().Scan(&id); err != nil {
				return 0, fmt.Errorf("date the audit log: %w", err)
			}
		}
		keepFrom = max(keepFrom, id.Int64)
	}
	if keepFrom == 0 {
		return 0, nil
	}
	deleted, err := s.deleteBelow(ctx, "audit_log", "id", keepFrom)
	if err != nil {
		return deleted, fmt.Errorf("prune the audit log below id %d: %w", keepFrom, err)
	}
	return deleted, nil
}

// AppendAudit appends audit entries of their own, made of no event (a webhook's
// deliveries), in one transaction.
func (s *Store) AppendAudit(ctx context.Context, entries []AuditEntry) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if len(entries) == 0 {
		return nil
	}
	defer s.observeWrite("audit_append", time.Now())
	unlock, err := s.lockWrite(ctx)
	if err != nil {
		return fmt.Errorf("append %d audit entries: %w", len(entries), err)
	}
	defer unlock()
	tx, err := s.sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("append %d audit entries: %w", len(entries), err)
	}
	if err := s.appendAudit(ctx, tx, entries); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("append %d audit entries: %w", len(entries), err)
	}
	return nil
}
