// Package store is agenticd's database, and the only package that knows GORM, SQLite and
// Postgres: opening and checking a SQLite file (OpenSQLite, CheckSQLite) or connecting to
// Postgres (OpenPostgres; dialect.go holds where the two differ), the schema, the history
// shared by the DeepChat and ACP presenters (conversations, their messages, and each
// message's typed blocks), and the service registry's tables (session owners and the
// event sequence floor, owners.go).
//
// Durability rule: a message that is still being produced is saved with status
// StatusInProgress; MarkInterrupted, run at start-up, turns whatever a crash left in
// that state into presenters.MessageIncomplete. SaveMessage replaces one whole message
// and its blocks in one transaction, so a reader never sees half a message.
//
// A presenter saves a message in progress again and again as it grows (checkpoints).
// The store remembers the block rows it last committed for each message in progress and
// writes only the rows that differ, and of a long text only the parts that differ
// (textparts.go), so a long turn costs the bytes that changed rather than the whole
// message at every checkpoint. A presenter that does not want to hold a long text whole
// saves it as updates (MessageUpdate) that carry only the text added since the last save;
// the store then remembers only the last part of such a text, and appends to it. A
// message in progress must therefore be written through one Store only: the server opens
// one, which every presenter shares, and each presenter writes only its own sessions'
// messages.
package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// StatusInProgress marks a stored message whose turn is still running. Readers get such
// a message with status presenters.MessageIncomplete: it is not whole yet.
const StatusInProgress presenters.MessageStatus = "in_progress"

// ErrConversationExists is returned by CreateConversation for an id already stored.
var ErrConversationExists = fmt.Errorf("conversation already exists: %w", presenters.ErrInvalidArgument)

// Conversation is one stored session.
type Conversation struct {
	ID      string
	AgentID string
	// AgentSessionID is the agent's own id for the session (ACP sessionId); empty is
	// taken as ID.
	AgentSessionID string
	Workspace      string
	Title          string
	ModelID        string
	ModeID         string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	Closed         bool
	Usage          presenters.TokenUsage
}

// Store reads and writes the history and the registry's tables. It is safe for
// concurrent use; its writes are serialized with every other writer of the database
// (WriteLock).
type Store struct {
	db      *gorm.DB
	writeMu sync.Locker // WriteLock(db)
	// ownsDB is set by Open: Close then closes the database too.
	ownsDB bool
	// Prepared once for the statements every session runs (creating and closing it, and
	// recording its owner): preparing each time was a tenth of a session's cost.
	// database/sql prepares them again on each connection that runs them, and closing the
	// database closes them too.
	insertConversationStmt *sql.Stmt
	updateConversationStmt *sql.Stmt
	insertSessionOwnerStmt *sql.Stmt
	// appendEventsStmt inserts appendRows events: a flood's batches are mostly full ones,
	// and preparing the statement each time was a third of the event log's cost.
	appendEventsStmt *sql.Stmt
	sqlDB            *sql.DB
	// dialect is the engine's: the statements above are prepared in its placeholders.
	dialect dialect
	// committed holds the block rows as last committed of each message saved in
	// progress; guarded by writeMu. An entry goes when its message is saved with a final
	// status, and when a write that included it fails (the next save rewrites it whole, or
	// an update reads it back first).
	committed map[string][]storedRow
	// claimed are the message ids clients chose that CheckMessageIDsFree let through and
	// that may not be stored yet: no other check lets them through again.
	claimed messageIDClaims
	// writeObserver, when set, times every write (SetWriteObserver).
	writeObserver WriteObserver
	// answersPruned is when a save last deleted expired request answers (unix nanos).
	answersPruned atomic.Int64
	// fence is the replica whose message writes this store makes (FenceMessages); empty
	// when it is no replica.
	fence string
}

// ErrFenced is the error of a message write for a session whose lease names another
// replica: that replica took the session over, and what this one writes of it is stale.
var ErrFenced = errors.New("another replica took the session over")

// FenceMessages makes the store a replica's: from then on a write of a session's messages
// or conversation whose lease row names another replica fails with ErrFenced, as that
// replica's event log appends leave the session's events out (AppendFenced). Call it
// before any write.
func (s *Store) FenceMessages(replica string) {
	s.fence = replica
}

// Open opens the database at path (OpenSQLite), brings its schema up to date and
// returns a store on it. Close closes the database too.
func Open(ctx context.Context, path string) (*Store, error) {
	db, err := OpenSQLite(path)
	if err != nil {
		return nil, err
	}
	return own(ctx, db)
}

// own is New on a database the store then owns: closed on failure, and by Close.
func own(ctx context.Context, db *gorm.DB) (*Store, error) {
	s, err := New(ctx, db)
	if err != nil {
		if sqlDB, dbErr := db.DB(); dbErr == nil {
			_ = sqlDB.Close()
		}
		return nil, err
	}
	s.ownsDB = true
	return s, nil
}

// New brings the schema of db up to date (the registry's tables, then the history's
// migrations) and returns a store on it. Close releases its prepared statements but
// leaves db open; closing db closes them too.
func New(ctx context.Context, db *gorm.DB) (*Store, error) {
	if err := migrate(ctx, db); err != nil {
		return nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("history database: %w", err)
	}
	s := &Store{db: db, sqlDB: sqlDB, dialect: dialectOf(db), writeMu: WriteLock(db), committed: make(map[string][]storedRow)}
	prepare := []struct {
		stmt **sql.Stmt
		sql  string
		what string
	}{
		{&s.insertConversationStmt, insertConversationSQL, "the conversation insert"},
		{&s.updateConversationStmt, updateConversationSQL, "the conversation update"},
		{&s.insertSessionOwnerStmt, insertSessionOwnerSQL, "the session owner insert"},
		{&s.appendEventsStmt, appendEventsSQL(appendRows), "the event log insert"},
	}
	for _, p := range prepare {
		if *p.stmt, err = sqlDB.PrepareContext(ctx, s.dialect.rebind(p.sql)); err != nil {
			_ = s.closeStatements()
			return nil, fmt.Errorf("history database: prepare %s: %w", p.what, err)
		}
	}
	return s, nil
}

// Close releases the prepared statements, and closes the database when Open opened it.
// The store must not be used afterwards.
func (s *Store) Close() error {
	err := s.closeStatements()
	if s.ownsDB {
		sqlDB, dbErr := s.db.DB()
		if dbErr == nil {
			dbErr = sqlDB.Close()
		}
		if dbErr != nil {
			err = errors.Join(err, fmt.Errorf("close database: %w", dbErr))
		}
	}
	return err
}

func (s *Store) closeStatements() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{s.insertConversationStmt, s.updateConversationStmt, s.insertSessionOwnerStmt, s.appendEventsStmt} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}

// writeStmt runs one prepared write statement on its own: a single statement is a
// transaction of its own in SQLite, so it needs no BEGIN and COMMIT round trips.
func (s *Store) writeStmt(ctx context.Context, stmt *sql.Stmt, args ...any) (sql.Result, error) {
	defer s.observeWrite("statement", time.Now())
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return stmt.ExecContext(ctx, args...)
}

// write runs fn in one write transaction.
func (s *Store) write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	defer s.observeWrite("transaction", time.Now())
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.db.WithContext(ctx).Transaction(fn)
}

const conversationColumns = `id, agent_id, agent_session_id, workspace, title, model_id, mode_id, created_at, updated_at, closed,
	usage_input_tokens, usage_output_tokens, usage_total_tokens, usage_cached_input_tokens,
	usage_reasoning_tokens, usage_context_used, usage_context_size, usage_cost, usage_cost_currency, usage_reported`

type conversationRow struct {
	ID                     string
	AgentID                string
	AgentSessionID         string
	Workspace              string
	Title                  string
	ModelID                string
	ModeID                 string
	CreatedAt              int64
	UpdatedAt              int64
	Closed                 bool
	UsageInputTokens       int64
	UsageOutputTokens      int64
	UsageTotalTokens       int64
	UsageCachedInputTokens int64
	UsageReasoningTokens   int64
	UsageContextUsed       int64
	UsageContextSize       int64
	UsageCost              float64
	UsageCostCurrency      string
	UsageReported          sql.NullInt64
}

func (r conversationRow) conversation() Conversation {
	agentSessionID := r.AgentSessionID
	if agentSessionID == "" {
		agentSessionID = r.ID
	}
	return Conversation{
		ID: r.ID, AgentID: r.AgentID, AgentSessionID: agentSessionID, Workspace: r.Workspace, Title: r.Title,
		ModelID: r.ModelID, ModeID: r.ModeID,
		CreatedAt: time.Unix(0, r.CreatedAt), UpdatedAt: time.Unix(0, r.UpdatedAt),
		Closed: r.Closed,
		Usage:  r.usage(),
	}
}

// CreateConversation stores a new conversation. Zero times are set to now.
// ErrConversationExists when the id is taken.
func (s *Store) CreateConversation(ctx context.Context, c Conversation) error {
	if c.ID == "" || c.AgentID == "" {
		return fmt.Errorf("create conversation: id and agent id are required: %w", presenters.ErrInvalidArgument)
	}
	now := time.Now()
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = c.CreatedAt
	}
	if c.AgentSessionID == "" {
		c.AgentSessionID = c.ID
	}
	args := append([]any{c.ID, c.AgentID, c.AgentSessionID, c.Workspace, c.Title, c.ModelID, c.ModeID,
		c.CreatedAt.UnixNano(), c.UpdatedAt.UnixNano(), c.Closed}, usageColumns(c.Usage)...)
	_, err := s.writeStmt(ctx, s.insertConversationStmt, args...)
	if isDuplicate(err) {
		return fmt.Errorf("conversation %s: %w", c.ID, ErrConversationExists)
	}
	if err != nil {
		return fmt.Errorf("create conversation %s: %w", c.ID, err)
	}
	return nil
}

// GetConversation returns one conversation; presenters.ErrNotFound if it is not stored.
func (s *Store) GetConversation(ctx context.Context, id string) (Conversation, error) {
	var rows []conversationRow
	err := s.db.WithContext(ctx).Raw(`SELECT `+conversationColumns+` FROM conversations WHERE id = ?`, id).
		Scan(&rows).Error
	if err != nil {
		return Conversation{}, fmt.Errorf("read conversation %s: %w", id, err)
	}
	if len(rows) == 0 {
		return Conversation{}, fmt.Errorf("session %s: %w", id, presenters.ErrNotFound)
	}
	return rows[0].conversation(), nil
}

// idBatch is how many ids one IN (...) query binds: far below SQLite's variable limit.
const idBatch = 500

// GetConversations returns the stored conversations among ids, in any order; an id not
// stored is left out. One query per 500 ids.
func (s *Store) GetConversations(ctx context.Context, ids []string) ([]Conversation, error) {
	out := make([]Conversation, 0, len(ids))
	for part := range slices.Chunk(ids, idBatch) {
		var rows []conversationRow
		err := s.db.WithContext(ctx).Raw(`SELECT `+conversationColumns+` FROM conversations WHERE id IN ?`, part).
			Scan(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("read %d conversations: %w", len(part), err)
		}
		for _, r := range rows {
			out = append(out, r.conversation())
		}
	}
	return out, nil
}

// CountMessagesOf returns the number of stored messages of each of the sessions; one
// with none is absent from the map. One query per 500 ids.
func (s *Store) CountMessagesOf(ctx context.Context, sessionIDs []string) (map[string]int64, error) {
	out := make(map[string]int64, len(sessionIDs))
	for part := range slices.Chunk(sessionIDs, idBatch) {
		var rows []messageCount
		err := s.db.WithContext(ctx).Raw(`SELECT conversation_id, COUNT(*) AS n FROM messages
			WHERE conversation_id IN ? GROUP BY conversation_id`, part).Scan(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("count messages of %d sessions: %w", len(part), err)
		}
		for _, r := range rows {
			out[r.ConversationID] = r.N
		}
	}
	return out, nil
}

type messageCount struct {
	ConversationID string
	N              int64
}

// UpdateConversation writes every mutable field of c (all but ID, AgentID, CreatedAt).
// A zero UpdatedAt is set to now. presenters.ErrNotFound if it is not stored.
func (s *Store) UpdateConversation(ctx context.Context, c Conversation) error {
	if s.fence != "" && s.dialect == postgresDialect {
		// A replica's: fenced like its message writes (a session it lost is not closed
		// or retitled under its new owner).
		err := s.write(ctx, func(tx *gorm.DB) error {
			if err := s.checkFenceOf(tx, []string{c.ID}); err != nil {
				return err
			}
			return updateConversation(tx, c)
		})
		if err != nil {
			return fmt.Errorf("update conversation %s: %w", c.ID, err)
		}
		return nil
	}
	res, err := s.writeStmt(ctx, s.updateConversationStmt, updateConversationArgs(c)...)
	var rows int64
	if err == nil {
		rows, err = res.RowsAffected()
	}
	if err != nil {
		return fmt.Errorf("update conversation %s: %w", c.ID, err)
	}
	return conversationUpdated(c.ID, rows, nil)
}

const (
	insertConversationSQL = `INSERT INTO conversations (` + conversationColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	updateConversationSQL = `UPDATE conversations SET agent_session_id = COALESCE(NULLIF(?, ''), id), workspace = ?, title = ?,
		model_id = ?, mode_id = ?, updated_at = ?, closed = ?, usage_input_tokens = ?, usage_output_tokens = ?,
		usage_total_tokens = ?, usage_cached_input_tokens = ?, usage_reasoning_tokens = ?,
		usage_context_used = ?, usage_context_size = ?, usage_cost = ?, usage_cost_currency = ?,
		usage_reported = ?
		WHERE id = ?`
)

// updateConversationArgs are updateConversationSQL's arguments; a zero UpdatedAt is now.
func updateConversationArgs(c Conversation) []any {
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = time.Now()
	}
	args := append([]any{c.AgentSessionID, c.Workspace, c.Title, c.ModelID, c.ModeID, c.UpdatedAt.UnixNano(), c.Closed},
		usageColumns(c.Usage)...)
	return append(args, c.ID)
}

// conversationUpdated is presenters.ErrNotFound when an update changed no row.
func conversationUpdated(id string, rows int64, err error) error {
	if err != nil {
		return err
	}
	if rows == 0 {
		return fmt.Errorf("session %s: %w", id, presenters.ErrNotFound)
	}
	return nil
}

func updateConversation(tx *gorm.DB, c Conversation) error {
	res := tx.Exec(updateConversationSQL, updateConversationArgs(c)...)
	return conversationUpdated(c.ID, res.RowsAffected, res.Error)
}

// SaveMessage upserts one whole message and its blocks in one transaction. The
// conversation must exist (presenters.ErrNotFound otherwise). A message keeps the place
// in its conversation it got when it was first saved.
func (s *Store) SaveMessage(ctx context.Context, m presenters.Message) error {
	return s.SaveMessages(ctx, m)
}

// SaveMessages upserts several whole messages in one transaction (all or none).
func (s *Store) SaveMessages(ctx context.Context, msgs ...presenters.Message) error {
	return s.writeMessages(ctx, wholeMessages(msgs), nil)
}

// SaveTurn writes the conversation (as UpdateConversation does) and upserts messages in
// one transaction, so a turn's end costs one commit.
func (s *Store) SaveTurn(ctx context.Context, c Conversation, msgs ...presenters.Message) error {
	return s.writeMessages(ctx, wholeMessages(msgs), func(tx *gorm.DB) error { return updateConversation(tx, c) })
}

// MessageUpdate is a save of a message that carries, for some of its text blocks, only
// the text they gained since the message was last saved: the block at each index in
// Appended (a text or reasoning block stored with that type) holds in its Text what
// follows its stored text, possibly nothing. Everything else is as SaveMessage takes it.
// A presenter writing a long reply so keeps only the text it has not saved yet, and a
// save writes only the last stored part of such a text and the new ones.
type MessageUpdate struct {
	presenters.Message
	Appended []int
	// Stamp, when set, is the message's stored updated_at after the save (Unix
	// nanoseconds) instead of the time of the save: a writer whose write failed without
	// knowing whether it committed (the connection lost the answer) reads it back
	// (MessageStamp) to learn whether it did, and does not append its text twice.
	Stamp int64
}

// UpdateMessages saves updates in order in one transaction (all or none); an update
// without Appended is a whole save, as SaveMessage.
func (s *Store) UpdateMessages(ctx context.Context, updates ...MessageUpdate) error {
	return s.writeMessages(ctx, updates, nil)
}

func wholeMessages(msgs []presenters.Message) []MessageUpdate {
	updates := make([]MessageUpdate, len(msgs))
	for i, m := range msgs {
		updates[i] = MessageUpdate{Message: m}
	}
	return updates
}

// writeMessages runs first (if any) and saves updates in one transaction, then records
// what was committed.
func (s *Store) writeMessages(ctx context.Context, updates []MessageUpdate, first func(tx *gorm.DB) error) error {
	defer s.observeWrite("messages", time.Now())
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	saved := make(map[string][]storedRow, len(updates)) // what this transaction wrote, by message
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.checkFence(tx, updates); err != nil {
			return err
		}
		if first != nil {
			if err := first(tx); err != nil {
				return err
			}
		}
		for _, u := range updates {
			prev, ok := saved[u.ID]
			if !ok {
				prev = s.committed[u.ID]
			}
			rows, err := saveMessage(tx, u, prev)
			if err != nil {
				return err
			}
			saved[u.ID] = rows
		}
		return nil
	})
	for _, u := range updates { // the last save of a message decides
		if err == nil && u.Status == StatusInProgress {
			s.committed[u.ID] = saved[u.ID]
		} else {
			delete(s.committed, u.ID)
		}
	}
	return err
}

// checkFence fails with ErrFenced when a session of updates is leased by another
// replica than the store's fence. It locks the sessions' lease rows until tx ends, so a
// take-over, which must update them, comes after the write: the replica taking over then
// reads what it wrote (and marks it interrupted), never the other way round.
func (s *Store) checkFence(tx *gorm.DB, updates []MessageUpdate) error {
	var ids []string
	for _, u := range updates {
		if !slices.Contains(ids, u.SessionID) {
			ids = append(ids, u.SessionID)
		}
	}
	return s.checkFenceOf(tx, ids)
}

// checkFenceOf is checkFence for the sessions ids.
func (s *Store) checkFenceOf(tx *gorm.DB, ids []string) error {
	if s.fence == "" || s.dialect != postgresDialect || len(ids) == 0 {
		return nil
	}
	var leases []struct{ SessionID, Replica string }
	if err := tx.Raw(`SELECT session_id, replica FROM session_leases WHERE session_id IN ? ORDER BY session_id FOR SHARE`, ids).
		Scan(&leases).Error; err != nil {
		return fmt.Errorf("check the sessions' leases: %w", err)
	}
	for _, l := range leases {
		if l.Replica != s.fence {
			return fmt.Errorf("session %s: %w (replica %s)", l.SessionID, ErrFenced, l.Replica)
		}
	}
	return nil
}

// saveMessage upserts u and its blocks. prev is what is stored of its blocks when known
// (nil: unknown; a whole save rewrites them all, an update reads them first); it returns
// the rows as stored now.
func saveMessage(tx *gorm.DB, u MessageUpdate, prev []storedRow) ([]storedRow, error) {
	m := u.Message
	if m.ID == "" || m.SessionID == "" || m.Role == "" || m.Status == "" {
		return nil, fmt.Errorf("save message %q: id, session id, role and status are required: %w", m.ID, presenters.ErrInvalidArgument)
	}
	rows := make([]blockRow, len(m.Blocks))
	for i, b := range m.Blocks {
		row, err := encodeBlock(m.ID, i, b)
		if err != nil {
			return nil, fmt.Errorf("save message %s: %w", m.ID, err)
		}
		rows[i] = row
	}
	appended := make([]bool, len(rows))
	for _, i := range u.Appended {
		if i < 0 || i >= len(rows) {
			return nil, fmt.Errorf("save message %s: appended block %d: it has blocks 0 to %d: %w", m.ID, i, len(rows)-1, presenters.ErrInvalidArgument)
		}
		appended[i] = true
	}
	if prev == nil && len(u.Appended) > 0 {
		var err error
		if prev, err = readStoredRows(tx, m.ID); err != nil {
			return nil, fmt.Errorf("save message %s: read its stored blocks: %w", m.ID, err)
		}
	}
	var usage *string
	if m.Usage != nil {
		u, err := encodeUsage(*m.Usage)
		if err != nil {
			return nil, fmt.Errorf("save message %s: usage: %w", m.ID, err)
		}
		usage = &u
	}
	now := time.Now()
	created := m.CreatedAt
	if created.IsZero() {
		created = now
	}
	res := tx.Exec(`INSERT INTO messages (id, conversation_id, role, status, stop_reason, usage, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET role = excluded.role, status = excluded.status,
			stop_reason = excluded.stop_reason, usage = excluded.usage, updated_at = excluded.updated_at
		WHERE messages.conversation_id = excluded.conversation_id`,
		m.ID, m.SessionID, string(m.Role), string(m.Status), string(m.StopReason), usage,
		created.UnixNano(), cmp.Or(u.Stamp, now.UnixNano()))
	if isMissingReference(res.Error) {
		return nil, fmt.Errorf("save message %s: session %s: %w", m.ID, m.SessionID, presenters.ErrNotFound)
	}
	if res.Error != nil {
		return nil, fmt.Errorf("save message %s: %w", m.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		return nil, presenters.WithDetail(fmt.Errorf("save message %s: it belongs to another session than %s: %w", m.ID, m.SessionID, presenters.ErrMessageIDInUse), "message_id", m.ID)
	}
	w, stored, err := planBlockWrites(rows, appended, prev)
	if err != nil {
		return nil, fmt.Errorf("save message %s: %w", m.ID, err)
	}
	if prev == nil {
		// Deleting a block deletes its text's parts (foreign key cascade).
		if err := tx.Exec(`DELETE FROM blocks WHERE message_id = ?`, m.ID).Error; err != nil {
			return nil, fmt.Errorf("save message %s: %w", m.ID, err)
		}
	} else if len(prev) > len(rows) {
		if err := tx.Exec(`DELETE FROM blocks WHERE message_id = ? AND position >= ?`, m.ID, len(rows)).Error; err != nil {
			return nil, fmt.Errorf("save message %s: %w", m.ID, err)
		}
	}
	if err := writeBlocks(tx, m.ID, w); err != nil {
		return nil, fmt.Errorf("save message %s: blocks: %w", m.ID, err)
	}
	touch := `UPDATE conversations SET updated_at = ` + dialectOf(tx).greatest() + `(updated_at, ?) WHERE id = ?`
	if err := tx.Exec(touch, now.UnixNano(), m.SessionID).Error; err != nil {
		return nil, fmt.Errorf("save message %s: %w", m.ID, err)
	}
	return stored, nil
}

// readStoredRows reads a message's block rows as committed, each text known by its count
// of parts and its last part.
func readStoredRows(tx *gorm.DB, messageID string) ([]storedRow, error) {
	var heads []struct {
		Position, TextParts                      int
		Type, Text, ToolID, ToolName, ToolStatus string
		RawArguments, RawResult                  []byte
		Payload                                  string
	}
	err := tx.Raw(`SELECT position, text_parts, type, text, tool_id, tool_name, tool_status, raw_arguments, raw_result, payload
		FROM blocks WHERE message_id = ? ORDER BY position`, messageID).Scan(&heads).Error
	if err != nil {
		return nil, err
	}
	out := make([]storedRow, 0, len(heads))
	for i, h := range heads {
		if h.Position != i {
			return nil, fmt.Errorf("message %s lacks its block %d: the history database is damaged; restore it from a backup", messageID, i)
		}
		r := storedRow{row: blockRow{MessageID: messageID, Position: i, Type: h.Type, Text: h.Text, ToolID: h.ToolID,
			ToolName: h.ToolName, ToolStatus: h.ToolStatus, RawArguments: h.RawArguments, RawResult: h.RawResult, Payload: h.Payload}}
		if h.TextParts > 0 {
			var last []string
			if err := tx.Raw(`SELECT text FROM block_text_parts WHERE message_id = ? AND position = ? AND part = ?`,
				messageID, i, h.TextParts).Scan(&last).Error; err != nil {
				return nil, err
			}
			if len(last) != 1 {
				return nil, fmt.Errorf("stored text of block %d of message %s lacks its part %d: the history database is damaged; restore it from a backup",
					i, messageID, h.TextParts)
			}
			r.tailOnly, r.parts, r.row.Text = true, h.TextParts+1, last[0]
		}
		out = append(out, r)
	}
	return out, nil
}

// writeBlocks makes the writes of one message's blocks; the blocks rows go before the
// text parts, which refer to them.
func writeBlocks(tx *gorm.DB, messageID string, w blockWrites) error {
	for _, t := range w.trims {
		if err := tx.Exec(`DELETE FROM block_text_parts WHERE message_id = ? AND position = ? AND part >= ?`,
			messageID, t.Position, t.Keep).Error; err != nil {
			return err
		}
	}
	for _, c := range w.counts {
		if err := tx.Exec(`UPDATE blocks SET text_parts = ? WHERE message_id = ? AND position = ?`,
			c.TextParts, messageID, c.Position).Error; err != nil {
			return err
		}
	}
	for batch := range statements(w.heads, blockHead.size) {
		var sb strings.Builder
		sb.WriteString(`INSERT INTO blocks (message_id, position, type, text, text_parts, tool_id, tool_name, tool_status, raw_arguments, raw_result, payload) VALUES `)
		args := make([]any, 0, len(batch)*11)
		for i, h := range batch {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, ?, CAST(? AS TEXT), ?, ?, ?, ?, ?, ?, CAST(? AS TEXT))")
			r := h.row
			args = append(args, r.MessageID, r.Position, r.Type, textArg(h.text), h.textParts, r.ToolID, r.ToolName, r.ToolStatus,
				nilIfEmpty(r.RawArguments), nilIfEmpty(r.RawResult), textArg(r.Payload))
		}
		sb.WriteString(` ON CONFLICT (message_id, position) DO UPDATE SET type = excluded.type, text = excluded.text,
			text_parts = excluded.text_parts, tool_id = excluded.tool_id, tool_name = excluded.tool_name,
			tool_status = excluded.tool_status, raw_arguments = excluded.raw_arguments,
			raw_result = excluded.raw_result, payload = excluded.payload`)
		if err := tx.Exec(sb.String(), args...).Error; err != nil {
			return err
		}
	}
	for batch := range statements(w.parts, textPart.size) {
		var sb strings.Builder
		sb.WriteString(`INSERT INTO block_text_parts (message_id, position, part, text) VALUES `)
		args := make([]any, 0, len(batch)*4)
		for i, p := range batch {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, ?, CAST(? AS TEXT))")
			args = append(args, p.MessageID, p.Position, p.Part, textArg(p.Text))
		}
		sb.WriteString(` ON CONFLICT (message_id, position, part) DO UPDATE SET text = excluded.text`)
		if err := tx.Exec(sb.String(), args...).Error; err != nil {
			return err
		}
	}
	return nil
}

// nilIfEmpty stores an absent raw value as NULL rather than an empty blob.
func nilIfEmpty(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// Messages returns the messages of a conversation that q selects, oldest first.
// presenters.ErrNotFound for an unknown session, or an after- or before-message the
// session does not hold.
func (s *Store) Messages(ctx context.Context, sessionID string, q presenters.MessageQuery) ([]presenters.Message, error) {
	var limit any = q.Limit
	if q.Limit <= 0 {
		limit = s.dialect.noLimit()
	}
	// One statement, so the page is one consistent snapshot even while a turn writes: a
	// text's parts are read with its block. Each block row (part 0) is followed by the
	// rows of its text's further parts. The range is picked from the end the limit keeps
	// (messages_by_conversation serves both directions).
	query := `WITH m AS MATERIALIZED (SELECT seq, id, role, status, stop_reason, usage, created_at
			FROM messages WHERE conversation_id = ? %s ORDER BY seq %s LIMIT ?)
		SELECT m.seq AS seq, m.id, m.role, m.status, m.stop_reason, m.usage, m.created_at,
			b.position AS position, 0 AS part, b.type, b.text, b.text_parts, b.tool_id, b.tool_name, b.tool_status,
			b.raw_arguments, b.raw_result, b.payload
		FROM m LEFT JOIN blocks AS b ON b.message_id = m.id
		UNION ALL
		SELECT m.seq, m.id, m.role, m.status, m.stop_reason, m.usage, m.created_at,
			p.position, p.part, NULL, p.text, NULL, NULL, NULL, NULL, NULL, NULL, NULL
		FROM m JOIN block_text_parts AS p ON p.message_id = m.id
		ORDER BY seq, position, part`
	args := []any{sessionID}
	var where strings.Builder
	// A bound the session does not hold compares with NULL and selects nothing;
	// explainEmpty then says which.
	if q.AfterMessageID != "" {
		where.WriteString(` AND seq > (SELECT seq FROM messages WHERE id = ? AND conversation_id = ?)`)
		args = append(args, q.AfterMessageID, sessionID)
	}
	if q.BeforeMessageID != "" {
		where.WriteString(` AND seq < (SELECT seq FROM messages WHERE id = ? AND conversation_id = ?)`)
		args = append(args, q.BeforeMessageID, sessionID)
	}
	if q.MessageID != "" {
		where.WriteString(` AND id = ?`)
		args = append(args, q.MessageID)
	}
	direction := "DESC"
	if q.FromOldest {
		direction = "ASC"
	}
	args = append(args, limit)
	rows, err := s.db.WithContext(ctx).Raw(fmt.Sprintf(query, where.String(), direction), args...).Rows()
	if err != nil {
		return nil, fmt.Errorf("read messages of session %s: %w", sessionID, err)
	}
	defer rows.Close()
	var out []presenters.Message
	var lastSeq int64 = -1
	var long longText
	for rows.Next() {
		var (
			seq, part                    int64
			id, role, status, stopReason string
			usage                        sql.NullString
			created                      int64
			position, textParts          sql.NullInt64
			typ, text, toolID, toolName  sql.NullString
			toolStatus, payload          sql.NullString
			rawArguments, rawResult      []byte
		)
		if err := rows.Scan(&seq, &id, &role, &status, &stopReason, &usage, &created,
			&position, &part, &typ, &text, &textParts, &toolID, &toolName, &toolStatus, &rawArguments, &rawResult, &payload); err != nil {
			return nil, fmt.Errorf("read messages of session %s: %w", sessionID, err)
		}
		if part > 0 {
			long.add(seq, int(position.Int64), int(part), text.String)
			continue
		}
		if err := long.finish(); err != nil {
			return nil, err
		}
		if seq != lastSeq {
			m := presenters.Message{
				ID: id, SessionID: sessionID, Role: presenters.MessageRole(role),
				Status: presenters.MessageStatus(status), StopReason: presenters.StopReason(stopReason),
				CreatedAt: time.Unix(0, created),
			}
			if m.Status == StatusInProgress {
				m.Status = presenters.MessageIncomplete
			}
			if usage.Valid {
				if m.Usage, err = decodeUsage(id, usage.String); err != nil {
					return nil, err
				}
			}
			out = append(out, m)
			lastSeq = seq
		}
		if !position.Valid {
			continue // a message without blocks
		}
		b, err := decodeBlock(blockRow{
			MessageID: id, Position: int(position.Int64), Type: typ.String, Text: text.String,
			ToolID: toolID.String, ToolName: toolName.String, ToolStatus: toolStatus.String,
			RawArguments: rawArguments, RawResult: rawResult, Payload: payload.String,
		})
		if err != nil {
			return nil, err
		}
		m := &out[len(out)-1]
		m.Blocks = append(m.Blocks, b)
		if textParts.Int64 > 0 {
			long.start(&m.Blocks[len(m.Blocks)-1], id, seq, int(position.Int64), int(textParts.Int64))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read messages of session %s: %w", sessionID, err)
	}
	if err := long.finish(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		if err := s.explainEmpty(ctx, sessionID, q.AfterMessageID, q.BeforeMessageID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// explainEmpty tells an empty page from an unknown session or bounding message.
func (s *Store) explainEmpty(ctx context.Context, sessionID string, bounds ...string) error {
	if _, err := s.GetConversation(ctx, sessionID); err != nil {
		return err
	}
	for _, id := range bounds {
		if id == "" {
			continue
		}
		var n int64
		if err := s.db.WithContext(ctx).Raw(`SELECT COUNT(*) FROM messages WHERE id = ? AND conversation_id = ?`, id, sessionID).Scan(&n).Error; err != nil {
			return fmt.Errorf("read messages of session %s: %w", sessionID, err)
		}
		if n == 0 {
			return fmt.Errorf("message %s in session %s: %w", id, sessionID, presenters.ErrNotFound)
		}
	}
	return nil
}

// CountMessages returns how many messages a conversation holds (0 for an unknown one).
func (s *Store) CountMessages(ctx context.Context, sessionID string) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Raw(`SELECT COUNT(*) FROM messages WHERE conversation_id = ?`, sessionID).Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("count messages of session %s: %w", sessionID, err)
	}
	return n, nil
}

// InterruptedMessage is a message MarkInterrupted found still in progress.
type InterruptedMessage struct {
	SessionID string
	MessageID string
	// AgentID is the agent of the message's conversation ("" when none is stored).
	AgentID string
}

// MarkInterrupted turns every message still in progress (left by a crash) into an
// incomplete one, and its unfinished tool calls into cancelled ones. Call it at
// start-up, before any turn runs. It returns the messages it changed, oldest first.
func (s *Store) MarkInterrupted(ctx context.Context) ([]InterruptedMessage, error) {
	return s.markInterrupted(ctx, "")
}

// MarkSessionInterrupted is MarkInterrupted for one session: for a replica that takes
// over a session whose owner died, while other replicas' turns run on.
func (s *Store) MarkSessionInterrupted(ctx context.Context, sessionID string) ([]InterruptedMessage, error) {
	if sessionID == "" {
		return nil, errors.New("mark a session's interrupted messages: empty session id")
	}
	return s.markInterrupted(ctx, sessionID)
}

// markInterrupted marks the messages in progress of one session, or of all ("").
func (s *Store) markInterrupted(ctx context.Context, sessionID string) ([]InterruptedMessage, error) {
	var marked []InterruptedMessage
	// inSession limits each statement to the session; "" matches every one.
	const inSession = ` AND (? = '' OR conversation_id = ?)`
	err := s.write(ctx, func(tx *gorm.DB) error {
		rows, err := tx.Raw(`SELECT m.conversation_id, m.id, COALESCE(c.agent_id, '') FROM messages m
			LEFT JOIN conversations c ON c.id = m.conversation_id
			WHERE m.status = ? AND (? = '' OR m.conversation_id = ?) ORDER BY m.seq`,
			string(StatusInProgress), sessionID, sessionID).Rows()
		if err != nil {
			return err
		}
		for rows.Next() {
			var m InterruptedMessage
			if err := rows.Scan(&m.SessionID, &m.MessageID, &m.AgentID); err != nil {
				_ = rows.Close()
				return err
			}
			marked = append(marked, m)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		// The rows it changes are no longer what was committed; other messages' are.
		for _, m := range marked {
			delete(s.committed, m.MessageID)
		}
		if len(marked) == 0 {
			return nil
		}
		err = tx.Exec(`UPDATE blocks SET tool_status = ?
			WHERE type = ? AND tool_status IN (?, ?)
			AND message_id IN (SELECT id FROM messages WHERE status = ?`+inSession+`)`,
			string(presenters.ToolCancelled), string(presenters.BlockTool),
			string(presenters.ToolPending), string(presenters.ToolInProgress), string(StatusInProgress), sessionID, sessionID).Error
		if err != nil {
			return err
		}
		return tx.Exec(`UPDATE messages SET status = ?, updated_at = ? WHERE status = ?`+inSession,
			string(presenters.MessageIncomplete), time.Now().UnixNano(), string(StatusInProgress), sessionID, sessionID).Error
	})
	if err != nil {
		return nil, fmt.Errorf("mark interrupted messages: %w", err)
	}
	return marked, nil
}

// UnendedMessages returns up to limit of the session's newest assistant messages, oldest
// first, that are stored finished while the event log holds events of theirs but not
// their MESSAGE_END: a replica stored the turn's end and lost the session before the
// event announcing it reached the log. Its subscribers never saw the turn end.
func (s *Store) UnendedMessages(ctx context.Context, sessionID string, limit int) ([]InterruptedMessage, error) {
	var ids []string
	err := s.db.WithContext(ctx).Raw(`SELECT id FROM (SELECT m.id, m.seq FROM messages m
		WHERE m.conversation_id = ? AND m.role = ? AND m.status NOT IN (?, ?)
		AND EXISTS (SELECT 1 FROM event_log e WHERE e.session_id = m.conversation_id AND e.message_id = m.id)
		AND NOT EXISTS (SELECT 1 FROM event_log e WHERE e.session_id = m.conversation_id AND e.message_id = m.id AND e.type = ?)
		ORDER BY m.seq DESC LIMIT ?) AS newest ORDER BY seq`,
		sessionID, string(presenters.RoleAssistant), string(StatusInProgress), string(presenters.MessageIncomplete),
		int(presenters.EventMessageEnd), limit).Scan(&ids).Error
	if err != nil {
		return nil, fmt.Errorf("find the unended messages of session %s: %w", sessionID, err)
	}
	out := make([]InterruptedMessage, len(ids))
	for i, id := range ids {
		out[i] = InterruptedMessage{SessionID: sessionID, MessageID: id}
	}
	return out, nil
}

// MarkMessagesInterrupted makes the session's messages incomplete, whatever their status,
// and their unfinished tool calls cancelled (as MarkInterrupted does for messages in
// progress): for UnendedMessages, whose stored end no subscriber saw.
func (s *Store) MarkMessagesInterrupted(ctx context.Context, sessionID string, msgs []InterruptedMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.MessageID
	}
	err := s.write(ctx, func(tx *gorm.DB) error {
		for _, id := range ids {
			delete(s.committed, id)
		}
		err := tx.Exec(`UPDATE blocks SET tool_status = ? WHERE type = ? AND tool_status IN (?, ?) AND message_id IN ?`,
			string(presenters.ToolCancelled), string(presenters.BlockTool), string(presenters.ToolPending), string(presenters.ToolInProgress), ids).Error
		if err != nil {
			return err
		}
		return tx.Exec(`UPDATE messages SET status = ?, stop_reason = ?, updated_at = ? WHERE conversation_id = ? AND id IN ?`,
			string(presenters.MessageIncomplete), string(presenters.StopError), time.Now().UnixNano(), sessionID, ids).Error
	})
	if err != nil {
		return fmt.Errorf("mark the interrupted messages of session %s: %w", sessionID, err)
	}
	return nil
}

// MessageStamp returns the stored updated_at of a message (Unix nanoseconds), which a
// save with a MessageUpdate.Stamp sets to that stamp; 0 when the message is not stored.
func (s *Store) MessageStamp(ctx context.Context, messageID string) (int64, error) {
	var stamps []int64
	if err := s.db.WithContext(ctx).Raw(`SELECT updated_at FROM messages WHERE id = ?`, messageID).Scan(&stamps).Error; err != nil {
		return 0, fmt.Errorf("read the stamp of message %s: %w", messageID, err)
	}
	if len(stamps) == 0 {
		return 0, nil
	}
	return stamps[0], nil
}
