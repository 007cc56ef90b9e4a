package store

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Reads of the event log by session, for readers that follow each session from a point of
// its own: sequences from several writers interleave in time, so a session's new events
// may lie below other sessions' older ones.

// sessionsPerRead is how many sessions one statement of ReadSessionEvents reads.
const sessionsPerRead = 64

// SessionHeads returns the newest logged sequence of each session with events the filter
// matches; sessions with none are absent. Named sessions are looked up one by one in
// event_log_by_session; without names it groups the whole log.
func (s *Store) SessionHeads(ctx context.Context, f EventFilter) (_ map[string]uint64, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	where, args := f.agentAndTypeConditions()
	heads := make(map[string]uint64)
	scan := func(query string, args []any) error {
		rows, err := s.db.WithContext(ctx).Raw(query, args...).Rows()
		if err != nil {
			return err
		}
		defer func() { _ = rows.Close() }()
		for rows.Next() {
			var (
				id   string
				head *int64 // NULL for a named session with no events
			)
			if err := rows.Scan(&id, &head); err != nil {
				return err
			}
			if head != nil {
				heads[id] = uint64(*head)
			}
		}
		return rows.Err()
	}
	if len(f.SessionIDs) == 0 {
		if err := scan(`SELECT session_id, MAX(sequence) FROM event_log WHERE TRUE`+where+` GROUP BY session_id`, args); err != nil {
			return nil, fmt.Errorf("read the newest logged event of each session: %w", err)
		}
		return heads, nil
	}
	for part := range slices.Chunk(f.SessionIDs, idBatch) {
		ids := make([]any, len(part))
		for i, id := range part {
			ids[i] = id
		}
		query := `WITH ids(id) AS (VALUES ` + strings.TrimSuffix(strings.Repeat(`(CAST(? AS TEXT)),`, len(part)), ",") + `)
			SELECT id, (SELECT MAX(sequence) FROM event_log WHERE session_id = ids.id` + where + `) FROM ids`
		if err := scan(query, append(ids, args...)); err != nil {
			return nil, fmt.Errorf("read the newest logged event of %d sessions: %w", len(part), err)
		}
	}
	return heads, nil
}

// ReadSessionEvents returns up to limit logged events of the sessions in after, each with
// a sequence above the session's entry there, that match the filter's agents and types
// (its sessions are those of after), oldest first; limit 0 or less is no limit. What it
// returns of each session is the start of what that session has above its entry.
func (s *Store) ReadSessionEvents(ctx context.Context, after map[string]uint64, f EventFilter, limit int) (_ []LoggedEvent, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	cond, condArgs := f.agentAndTypeConditions()
	limitClause := ""
	if limit > 0 {
		limitClause = ` LIMIT ?`
	}
	var out []LoggedEvent
	sessions := slices.Sorted(maps.Keys(after))
	for part := range slices.Chunk(sessions, sessionsPerRead) {
		// One subquery per session, each a range of event_log_by_session.
		var query strings.Builder
		var args []any
		for i, id := range part {
			if i > 0 {
				query.WriteString(` UNION ALL `)
			}
			fmt.Fprintf(&query, `SELECT * FROM (SELECT %s FROM event_log WHERE session_id = ? AND sequence > ?%s ORDER BY sequence%s) AS s%d`,
				loggedEventColumns, cond, limitClause, i)
			args = append(args, id, int64(after[id]))
			args = append(args, condArgs...)
			if limit > 0 {
				args = append(args, limit)
			}
		}
		query.WriteString(` ORDER BY sequence` + limitClause)
		if limit > 0 {
			args = append(args, limit)
		}
		evs, err := s.queryEvents(ctx, query.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("read the logged events of %d sessions: %w", len(part), err)
		}
		out = append(out, evs...)
	}
	if len(sessions) > sessionsPerRead {
		slices.SortFunc(out, func(a, b LoggedEvent) int { return cmp.Compare(a.Sequence, b.Sequence) })
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
