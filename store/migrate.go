package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// migrations are applied in order, each once, each in its own transaction. Append only:
// a released migration is never edited. Statements are separated by semicolons, so
// none may contain one. Each step is written once for both dialects: a word in braces
// is a type its dialect spells its own way (dialectWords).
var migrations = []string{
	// 1: conversations, messages, blocks.
	`
CREATE TABLE conversations (
	id                        TEXT PRIMARY KEY,
	agent_id                  TEXT NOT NULL,
	workspace                 TEXT NOT NULL DEFAULT '',
	title                     TEXT NOT NULL DEFAULT '',
	model_id                  TEXT NOT NULL DEFAULT '',
	mode_id                   TEXT NOT NULL DEFAULT '',
	created_at                {int} NOT NULL,
	updated_at                {int} NOT NULL,
	closed                    {bool} NOT NULL DEFAULT {false},
	usage_input_tokens        {int} NOT NULL DEFAULT 0,
	usage_output_tokens       {int} NOT NULL DEFAULT 0,
	usage_total_tokens        {int} NOT NULL DEFAULT 0,
	usage_cached_input_tokens {int} NOT NULL DEFAULT 0,
	usage_reasoning_tokens    {int} NOT NULL DEFAULT 0,
	usage_context_used        {int} NOT NULL DEFAULT 0,
	usage_context_size        {int} NOT NULL DEFAULT 0,
	usage_cost                {real} NOT NULL DEFAULT 0,
	usage_cost_currency       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX conversations_by_agent ON conversations(agent_id, created_at);

CREATE TABLE messages (
	seq             {serial},
	id              TEXT NOT NULL UNIQUE,
	conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
	role            TEXT NOT NULL,
	status          TEXT NOT NULL,
	stop_reason     TEXT NOT NULL DEFAULT '',
	usage           TEXT,
	created_at      {int} NOT NULL,
	updated_at      {int} NOT NULL
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, seq);
CREATE INDEX messages_in_progress ON messages(status) WHERE status = 'in_progress';

CREATE TABLE blocks (
	id            {serial},
	message_id    TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
	position      {int} NOT NULL,
	type          TEXT NOT NULL,
	text          TEXT NOT NULL DEFAULT '',
	tool_id       TEXT NOT NULL DEFAULT '',
	tool_name     TEXT NOT NULL DEFAULT '',
	tool_status   TEXT NOT NULL DEFAULT '',
	raw_arguments {blob},
	raw_result    {blob},
	payload       TEXT NOT NULL DEFAULT '',
	UNIQUE (message_id, position)
);
CREATE INDEX blocks_by_tool ON blocks(tool_id) WHERE tool_id <> '';
`,
	// 2: long texts in parts (textparts.go). A block's text is its text column followed
	// by text_parts rows of block_text_parts, numbered from 1; texts stored before this
	// migration are whole in the text column, with text_parts 0. Parts go with their
	// block, and so with its message and conversation.
	`
ALTER TABLE blocks ADD COLUMN text_parts {int} NOT NULL DEFAULT 0;

CREATE TABLE block_text_parts (
	message_id TEXT NOT NULL,
	position   {int} NOT NULL,
	part       {int} NOT NULL,
	text       TEXT NOT NULL,
	PRIMARY KEY (message_id, position, part),
	FOREIGN KEY (message_id, position) REFERENCES blocks(message_id, position) ON DELETE CASCADE
);
`,
	// 3: the agent's own session id beside the session id agenticd mints (sessions
	// stored before kept the agent's id as theirs: it is both), and which usage counts
	// were reported (NULL for rows from before: their non-zero counts were).
	`
ALTER TABLE conversations ADD COLUMN agent_session_id TEXT NOT NULL DEFAULT '';
UPDATE conversations SET agent_session_id = id;
ALTER TABLE conversations ADD COLUMN usage_reported {int};
`,
	// 4: the event log (eventlog.go): every event published, as its subscribers got it,
	// by its server-wide sequence. type is the payload's presenters.EventType, numbered as
	// AgenticEventType in the proto; session_id is '' for an agent's event, message_id ''
	// for an event of no message. Rows have no foreign keys: DeleteSession removes a
	// session's rows itself, retention the rest.
	`
CREATE TABLE event_log (
	sequence   {int} PRIMARY KEY,
	session_id TEXT NOT NULL,
	agent_id   TEXT NOT NULL,
	type       {int} NOT NULL,
	message_id TEXT NOT NULL DEFAULT '',
	time       {int} NOT NULL,
	data       {blob} NOT NULL
);
CREATE UNIQUE INDEX event_log_by_session ON event_log(session_id, sequence);
`,
	// 5: what a session was created with beyond its workspace (sessionsetup.go), for
	// loading it again: further directories and its own MCP servers, as JSON arrays.
	`
CREATE TABLE session_setups (
	session_id             TEXT PRIMARY KEY,
	additional_directories TEXT NOT NULL DEFAULT '[]',
	mcp_servers            TEXT NOT NULL DEFAULT '[]'
);
`,
	// 6: the audit log (audit.go): entries made from the events the event log appends,
	// in the same transactions. data is the entry as its API message encodes it; the
	// other columns are what ListAuditEvents filters on. Rows have no foreign keys: an
	// audit trail outlives the sessions it tells of, until retention drops it.
	`
CREATE TABLE audit_log (
	id         {serial},
	time       {int} NOT NULL,
	kind       {int} NOT NULL,
	session_id TEXT NOT NULL,
	agent_id   TEXT NOT NULL,
	data       {blob} NOT NULL
);
CREATE INDEX audit_log_by_session ON audit_log(session_id, id);
CREATE INDEX audit_log_by_time ON audit_log(time);
`,
	// 7: session leases (leases.go): the replica that serves a session, and its address,
	// until expires_at (Unix nanoseconds by the database's clock). previous_replica is
	// written by each acquisition: the replica whose lapsed lease it took over, '' if
	// none. Rows have no foreign keys: DeleteSession removes a session's lease.
	`
CREATE TABLE session_leases (
	session_id       TEXT PRIMARY KEY,
	replica          TEXT NOT NULL,
	address          TEXT NOT NULL,
	expires_at       {int} NOT NULL,
	previous_replica TEXT NOT NULL DEFAULT ''
);
CREATE INDEX session_leases_by_replica ON session_leases(replica);
`,
	// 8: messages waiting for a session's running turn to end (queue.go), in the order
	// they were queued (position, a counter per database).
	`
CREATE TABLE queued_messages (
	position        {serial},
	session_id      TEXT NOT NULL,
	message_id      TEXT NOT NULL UNIQUE,
	user_message_id TEXT NOT NULL UNIQUE,
	content         TEXT NOT NULL,
	reason          TEXT NOT NULL DEFAULT '',
	queued_at       {int} NOT NULL
);
CREATE INDEX queued_messages_by_session ON queued_messages(session_id, position);
`,
	// 9: who sent each message: a queued message's sender, who its turn runs for when it
	// starts (here, after a restart, or on the replica that took the session over); and
	// the sender of each user message, recorded before its turn starts (so no foreign
	// key: the message row comes after).
	`
ALTER TABLE queued_messages ADD COLUMN principal TEXT NOT NULL DEFAULT '';
CREATE TABLE message_senders (
	message_id TEXT PRIMARY KEY,
	session_id TEXT NOT NULL,
	principal  TEXT NOT NULL
);
CREATE INDEX message_senders_by_session ON message_senders(session_id);
`,
	// 10: sessions' own webhooks (CreateSession's config.webhook), so that they outlive a
	// restart and reach the replica that takes a session over; events is a JSON array of
	// the kinds the hook is told of (empty: all).
	`
CREATE TABLE session_webhooks (
	session_id TEXT PRIMARY KEY,
	url        TEXT NOT NULL,
	events     TEXT NOT NULL DEFAULT '[]'
);
`,
}

// dialectWords spell the braced words of migrations in each dialect. SQLite's INTEGER
// is 64 bits, so Postgres's BIGINT; its AUTOINCREMENT keys are Postgres's identity
// columns; BLOB is BYTEA; a flag written as a Go bool is BOOLEAN on Postgres and an
// INTEGER on SQLite. The Postgres words were its separate migrations' before they were
// written once, so a database migrated by either reads the same.
var dialectWords = map[dialect]*strings.Replacer{
	sqliteDialect: strings.NewReplacer(
		"{int}", "INTEGER", "{serial}", "INTEGER PRIMARY KEY AUTOINCREMENT",
		"{real}", "REAL", "{blob}", "BLOB", "{bool}", "INTEGER", "{false}", "0"),
	postgresDialect: strings.NewReplacer(
		"{int}", "BIGINT", "{serial}", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
		"{real}", "DOUBLE PRECISION", "{blob}", "BYTEA", "{bool}", "BOOLEAN", "{false}", "FALSE"),
}

// migrationSteps are migrations in d's words.
func migrationSteps(d dialect) []string {
	steps := make([]string, len(migrations))
	for i, m := range migrations {
		steps[i] = dialectWords[d].Replace(m)
	}
	return steps
}

// migrationLockKey is the Postgres advisory lock migrate holds: any fixed number, the
// same in every agenticd. Advisory locks are per database, so stores on other schemas of
// the same database wait for each other's migrations too, which costs only a moment.
const migrationLockKey int64 = 0x61676e7463640001

// migrate brings the schema up to date. It refuses a database written by a newer
// version, whose schema it cannot know. On Postgres it holds migrationLockKey
// throughout, so that of several agenticd starting at once on one database one
// migrates and the others wait, then find the schema current: without it they would
// apply the same migrations side by side and all but one fail.
func migrate(ctx context.Context, db *gorm.DB) error {
	db = db.WithContext(ctx)
	if dialectOf(db) != postgresDialect {
		return migrateLocked(db)
	}
	// A session lock, on the one connection all the migration's statements use: each
	// migration keeps its own transaction.
	return db.Connection(func(conn *gorm.DB) (err error) {
		// Waiting for another agenticd's migration, and migrating a large database, may
		// take longer than the limits of ordinary statements (PostgresLimits); RESET
		// brings the connection's own back before it returns to the pool.
		for _, set := range []string{`SET lock_timeout = 0`, `SET statement_timeout = 0`} {
			if err := conn.Exec(set).Error; err != nil {
				return fmt.Errorf("migrate the history database: %w", err)
			}
		}
		defer func() {
			reset := errors.Join(conn.WithContext(context.WithoutCancel(ctx)).Exec(`RESET lock_timeout`).Error,
				conn.WithContext(context.WithoutCancel(ctx)).Exec(`RESET statement_timeout`).Error)
			if err == nil && reset != nil {
				err = fmt.Errorf("migrate the history database: %w", reset)
			}
		}()
		if err := conn.Exec(`SELECT pg_advisory_lock(?)`, migrationLockKey).Error; err != nil {
			return fmt.Errorf("wait for other agenticd migrating the history database: %w", err)
		}
		defer func() {
			// Released even when ctx ended; a connection that fails here is broken, and
			// Postgres releases the locks of a closed session.
			unlock := conn.WithContext(context.WithoutCancel(ctx)).Exec(`SELECT pg_advisory_unlock(?)`, migrationLockKey).Error
			if err == nil && unlock != nil {
				err = fmt.Errorf("release the history migration lock: %w", unlock)
			}
		}()
		return migrateLocked(conn)
	})
}

// migrateLocked is migrate once no one else migrates the database. The registry's GORM
// tables are made here too, under the same lock: two AutoMigrates side by side collide
// as the migrations do.
func migrateLocked(db *gorm.DB) error {
	if err := db.AutoMigrate(&SessionOwner{}, &sequenceFloor{}, &SessionGrant{}, &RequestAnswer{}); err != nil {
		return fmt.Errorf("create the registry tables: %w", err)
	}
	steps, appliedAt := migrationSteps(dialectOf(db)), "INTEGER"
	if dialectOf(db) == postgresDialect {
		appliedAt = "BIGINT"
	}
	if err := db.Exec(`CREATE TABLE IF NOT EXISTS transcript_schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at ` + appliedAt + ` NOT NULL
	)`).Error; err != nil {
		return fmt.Errorf("create transcript_schema_migrations: %w", err)
	}
	var current int
	if err := db.Raw(`SELECT COALESCE(MAX(version), 0) FROM transcript_schema_migrations`).Scan(&current).Error; err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > len(steps) {
		return fmt.Errorf("history database has schema version %d but this agenticd knows only %d; run a newer agenticd or use another data_dir (or database)", current, len(steps))
	}
	for v := current + 1; v <= len(steps); v++ {
		err := db.Transaction(func(tx *gorm.DB) error {
			// One statement per Exec keeps errors pointing at the failing statement.
			for _, stmt := range strings.Split(steps[v-1], ";") {
				if strings.TrimSpace(stmt) == "" {
					continue
				}
				if err := tx.Exec(stmt).Error; err != nil {
					return err
				}
			}
			return tx.Exec(`INSERT INTO transcript_schema_migrations (version, applied_at) VALUES (?, ?)`, v, time.Now().UnixNano()).Error
		})
		if err != nil {
			return fmt.Errorf("apply history schema migration %d: %w", v, err)
		}
	}
	return nil
}
