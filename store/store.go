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
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// StatusInProgress marks a stored message whose turn is still running. Readers get such
// a message with status presenters.MessageIncomplete: it is not whole yet.
const StatusInProgress presenters.MessageStatus = "in_progress"

// Store reads and writes the history and the registry's tables. It is safe for
// concurrent use; its writes are serialized with every other writer of the database
// (WriteLock). Every call honours its context, waiting for the write lock included, and
// on Postgres none waits on the database longer than PostgresLimits.Call.
type Store struct {
	db      *gorm.DB
	writeMu *WriteGate // WriteLock(db)
	// callBound is PostgresLimits.Call and longBound PostgresLimits.Statement on
	// Postgres (call, longCall); both are 0 on SQLite: a local file cannot be cut off.
	callBound, longBound time.Duration
	// ownsDB is set by Open: Close then closes the database too.
	ownsDB bool
	// Prepared once for the statements every session runs (creating and closing it,
	// recording its owner, and the look at its queue when it closes or a turn ends):
	// preparing each time was a tenth of a session's cost.
	// database/sql prepares them again on each connection that runs them, and closing the
	// database closes them too.
	insertConversationStmt *sql.Stmt
	updateConversationStmt *sql.Stmt
	insertSessionOwnerStmt *sql.Stmt
	queuedMessagesStmt     *sql.Stmt
	// A session's owner record and ACL, which calls on it read (owners.go, access.go).
	sessionOwnerStmt  *sql.Stmt
	sessionGrantsStmt *sql.Stmt
	// The request answers of calls with a request_id (requestanswers.go): looked up on
	// the first call with an id, saved after it.
	saveRequestAnswerStmt   *sql.Stmt
	lookupRequestAnswerStmt *sql.Stmt
	// appendEventsStmts[k] inserts 1<<k events, up to appendRows: a batch of any size is
	// a few of them (appendChunk), and preparing a statement for each batch's size was a
	// third of the event log's cost. insertAuditStmt inserts one audit entry.
	appendEventsStmts [appendSizes]*sql.Stmt
	insertAuditStmt   *sql.Stmt
	// prepared is every statement above, for Close.
	prepared []*sql.Stmt
	sqlDB    *sql.DB
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
	if s.dialect == postgresDialect {
		limits := limitsOf(db)
		s.callBound, s.longBound = limits.Call, max(limits.Statement, limits.Call)
	}
	type statement struct {
		stmt      **sql.Stmt
		sql, what string
	}
	prepare := []statement{
		{&s.insertConversationStmt, insertConversationSQL, "the conversation insert"},
		{&s.updateConversationStmt, updateConversationSQL, "the conversation update"},
		{&s.insertSessionOwnerStmt, insertSessionOwnerSQL, "the session owner insert"},
		{&s.insertAuditStmt, insertAuditSQL, "the audit log insert"},
		{&s.queuedMessagesStmt, queuedMessagesSQL, "the queue's read"},
		{&s.saveRequestAnswerStmt, saveRequestAnswerSQL, "the request answer insert"},
		{&s.lookupRequestAnswerStmt, lookupRequestAnswerSQL, "the request answer lookup"},
		{&s.sessionOwnerStmt, sessionOwnerSQL, "the session owner lookup"},
		{&s.sessionGrantsStmt, sessionGrantsSQL, "the session ACL lookup"},
	}
	for k := range s.appendEventsStmts {
		prepare = append(prepare, statement{&s.appendEventsStmts[k], appendEventsSQL(1 << k), "the event log insert"})
	}
	for _, p := range prepare {
		if *p.stmt, err = sqlDB.PrepareContext(ctx, s.dialect.rebind(p.sql)); err != nil {
			_ = s.closeStatements()
			return nil, fmt.Errorf("history database: prepare %s: %w", p.what, err)
		}
		s.prepared = append(s.prepared, *p.stmt)
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
	for _, stmt := range s.prepared {
		errs = append(errs, stmt.Close())
	}
	return errors.Join(errs...)
}

// errCallBound is the cause of a call's context that ran out of the store's bound.
var errCallBound = errors.New("the store's bound of one call ran out")

// call bounds one call of the store (callBound) and returns its context and what ends
// it, which the call defers with its error: an error of a call that ran out of the bound,
// its caller's context still live, becomes ErrUnavailable, for the caller to try again
// (here, or on another replica) instead of waiting out a deadline of its own.
func (s *Store) call(ctx context.Context) (context.Context, func(*error)) {
	return s.callWithin(ctx, s.callBound)
}

// longCall is call for the calls whose work grows with the database (retention,
// deleting a session, marking every reply interrupted at start-up): they get the
// server's statement timeout, PostgresLimits.Statement.
func (s *Store) longCall(ctx context.Context) (context.Context, func(*error)) {
	return s.callWithin(ctx, s.longBound)
}

func (s *Store) callWithin(ctx context.Context, bound time.Duration) (context.Context, func(*error)) {
	if bound <= 0 {
		return ctx, func(*error) {}
	}
	bounded, cancel := context.WithTimeoutCause(ctx, bound, errCallBound)
	return bounded, func(err *error) {
		if *err != nil && ctx.Err() == nil && errors.Is(context.Cause(bounded), errCallBound) && !errors.Is(*err, ErrUnavailable) {
			*err = fmt.Errorf("%w; the database did not answer within %s: %w", *err, bound, ErrUnavailable)
		}
		cancel()
	}
}

// lockWrite takes the write lock, or fails when ctx ends first.
func (s *Store) lockWrite(ctx context.Context) (unlock func(), err error) {
	if err := s.writeMu.Lock(ctx); err != nil {
		return nil, err
	}
	return s.writeMu.Unlock, nil
}

// writeStmt runs one prepared write statement on its own: a single statement is a
// transaction of its own in SQLite, so it needs no BEGIN and COMMIT round trips.
func (s *Store) writeStmt(ctx context.Context, stmt *sql.Stmt, args ...any) (sql.Result, error) {
	defer s.observeWrite("statement", time.Now())
	unlock, err := s.lockWrite(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return stmt.ExecContext(ctx, args...)
}

// write runs fn in one write transaction.
func (s *Store) write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	defer s.observeWrite("transaction", time.Now())
	unlock, err := s.lockWrite(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return s.db.WithContext(ctx).Transaction(fn)
}
