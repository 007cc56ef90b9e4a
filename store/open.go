package store

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"golang.org/x/sync/semaphore"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// OpenSQLite opens (creating it and its parent directory if needed) the SQLite database
// at path in WAL mode, with foreign keys on, a busy timeout, and transactions that take
// the write lock at BEGIN so that concurrent writers wait instead of failing.
func OpenSQLite(path string) (*gorm.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("open history database: empty path; set data_dir")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open history database %q: the path must not contain '?' or '#'; choose another data_dir", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open history database: create directory: %w", err)
	}
	// synchronous=NORMAL is durable across process crashes in WAL mode (only a power
	// loss can lose the last commits), which is what the incomplete-turn rule needs.
	dsn := path + "?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=10000&_foreign_keys=on&_txlock=immediate"
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		// No PrepareStmt: its statement cache starts a goroutine that never ends.
	})
	if err != nil {
		return nil, fmt.Errorf("open history database %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("open history database %s: %w", path, err)
	}
	sqlDB.SetMaxOpenConns(8)
	sqlDB.SetMaxIdleConns(4)
	var mode string
	if err := db.Raw("PRAGMA journal_mode").Scan(&mode).Error; err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open history database %s: %w", path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open history database %s: journal mode is %q, not WAL; put the data dir on a local file system", path, mode)
	}
	if err := db.Use(writeGate{newWriteGate()}); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open history database %s: %w", path, err)
	}
	return db, nil
}

// writeGate is the one write lock of a database opened by OpenSQLite, kept as a GORM
// plugin so that everyone holding the *gorm.DB finds the same one (WriteLock).
type writeGate struct{ *WriteGate }

const writeGateName = "agenticd:write-gate"

func (writeGate) Name() string              { return writeGateName }
func (writeGate) Initialize(*gorm.DB) error { return nil }

// WriteGate is a write lock that a writer may give up waiting for: Lock returns when the
// writer's context ends first, so a caller queued behind a write that stalled (a
// database that stopped answering) leaves when its own time is up instead of when the
// stalled write ends. Waiters get it first come, first served.
type WriteGate struct{ sem *semaphore.Weighted }

func newWriteGate() *WriteGate { return &WriteGate{sem: semaphore.NewWeighted(1)} }

// Lock takes the lock, or returns ctx's error when ctx ends first (without it).
func (g *WriteGate) Lock(ctx context.Context) error {
	if err := g.sem.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("wait for the database's write lock: %w", err)
	}
	return nil
}

// Unlock releases the lock Lock took.
func (g *WriteGate) Unlock() { g.sem.Release(1) }

// WriteLock returns the lock that every writer of the database takes around a write
// transaction or a single write statement. SQLite has one writer at a time anyway; a
// writer that finds the database locked waits in SQLite's busy handler, which sleeps
// whole milliseconds per try, and concurrent writers (session owners, each presenter's
// history, the sequence floor) used to meet there several times per session. Queued on
// this lock instead, the next writer starts as soon as the last one commits; every Store
// on the same database shares it. A database not opened by OpenSQLite gets a lock of its
// own per call (its callers then serialize only their own writes).
func WriteLock(db *gorm.DB) *WriteGate {
	if g, ok := db.Config.Plugins[writeGateName].(writeGate); ok {
		return g.WriteGate
	}
	return newWriteGate()
}

// OpenPostgres connects to the Postgres database at dsn (a postgres:// URL or key=value
// connection string) with DefaultPostgresLimits and checks that it answers. Unlike a
// SQLite file, the database must exist; New creates the tables in it.
func OpenPostgres(ctx context.Context, dsn string) (*gorm.DB, error) {
	return OpenPostgresWith(ctx, dsn, DefaultPostgresLimits)
}

// OpenPostgresWith is OpenPostgres with limits of the caller's.
func OpenPostgresWith(ctx context.Context, dsn string, limits PostgresLimits) (*gorm.DB, error) {
	config, err := postgresConfig(dsn, limits)
	if err != nil {
		return nil, fmt.Errorf("open the Postgres database %s: %w", RedactDSN(dsn), err)
	}
	sqlDB := stdlib.OpenDB(*config)
	// DSN too, for the listener of notifications (ListenEvents), which connects alone.
	db, err := gorm.Open(postgres.New(postgres.Config{DSN: dsn, Conn: sqlDB}), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		DisableAutomaticPing:   true, // pinged below, with ctx
	})
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open the Postgres database %s: %w", RedactDSN(dsn), err)
	}
	db.Config.Plugins[postgresLimitsName] = postgresLimitsPlugin{limits}
	sqlDB.SetMaxOpenConns(16)
	sqlDB.SetMaxIdleConns(8)
	// Connections that idle long are dropped: a server restart or a proxy leaves them dead.
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open the Postgres database %s: %w; check that the server runs, that the database exists and that the URL's user may log in", RedactDSN(dsn), err)
	}
	return db, nil
}

// postgresLimitsPlugin keeps a database's limits with it, for the connections the store
// makes alone (ListenEvents).
type postgresLimitsPlugin struct{ PostgresLimits }

const postgresLimitsName = "agenticd:postgres-limits"

func (postgresLimitsPlugin) Name() string              { return postgresLimitsName }
func (postgresLimitsPlugin) Initialize(*gorm.DB) error { return nil }

// limitsOf is the limits db was opened with; DefaultPostgresLimits for one opened
// elsewhere.
func limitsOf(db *gorm.DB) PostgresLimits {
	if p, ok := db.Config.Plugins[postgresLimitsName].(postgresLimitsPlugin); ok {
		return p.PostgresLimits
	}
	return DefaultPostgresLimits
}

// OpenOnPostgres opens the Postgres database at dsn (OpenPostgres), brings its schema up
// to date and returns a store on it. Close closes the connections too.
func OpenOnPostgres(ctx context.Context, dsn string) (*Store, error) {
	return OpenOnPostgresWith(ctx, dsn, DefaultPostgresLimits)
}

// OpenOnPostgresWith is OpenOnPostgres with limits of the caller's.
func OpenOnPostgresWith(ctx context.Context, dsn string, limits PostgresLimits) (*Store, error) {
	db, err := OpenPostgresWith(ctx, dsn, limits)
	if err != nil {
		return nil, err
	}
	return own(ctx, db)
}

// RedactDSN is dsn without its password, for messages and logs.
func RedactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "(a connection string)" // key=value form or unparsable: it may hold a password anywhere
	}
	return u.Redacted()
}
