package store

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// A database written before sessions had an agent session id beside theirs and before
// usage told "not reported" from zero reads as it meant: each session's id is also its
// agent's, and a zero count is an unreported one.
func TestRowsWrittenBeforeMigration3ReadAsTheyMeant(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "old.db"))
	all := migrations
	migrations = all[:2]
	err := migrate(ctx, db)
	migrations = all
	if err != nil {
		t.Fatal(err)
	}
	// As the release before wrote them: every usage count, zero for "not reported".
	if err := db.Exec(`INSERT INTO conversations (id, agent_id, created_at, updated_at, usage_input_tokens, usage_cost)
		VALUES ('old-session', 'acp.test.agent', 1, 1, 5, 0)`).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`INSERT INTO messages (id, conversation_id, role, status, usage, created_at, updated_at)
		VALUES ('m1', 'old-session', 'assistant', 'complete',
		'{"InputTokens":0,"OutputTokens":7,"TotalTokens":0,"CachedInputTokens":0,"ReasoningTokens":0,"ContextUsed":0,"ContextSize":0,"Cost":0,"CostCurrency":""}', 1, 1)`).Error; err != nil {
		t.Fatal(err)
	}

	s, err := New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	conv, err := s.GetConversation(ctx, "old-session")
	if err != nil {
		t.Fatal(err)
	}
	if conv.AgentSessionID != "old-session" {
		t.Errorf("agent session id = %q, want the session's own id", conv.AgentSessionID)
	}
	if u := conv.Usage; u.InputTokens == nil || *u.InputTokens != 5 || u.OutputTokens != nil || u.Cost != nil {
		t.Errorf("conversation usage = %+v; want input 5 and the zeros unreported", u)
	}
	msgs, err := s.Messages(ctx, "old-session", presenters.MessageQuery{})
	if err != nil || len(msgs) != 1 || msgs[0].Usage == nil {
		t.Fatalf("Messages = %+v, %v", msgs, err)
	}
	if u := msgs[0].Usage; u.OutputTokens == nil || *u.OutputTokens != 7 || u.InputTokens != nil || u.Cost != nil {
		t.Errorf("message usage = %+v; want output 7 and the zeros unreported", u)
	}
}

func TestCheckMessageIDsFree(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "deepchat.default")
		mustCreate(t, s, "c2", "deepchat.default")
		if err := s.SaveMessage(ctx, presenters.Message{ID: "taken", SessionID: "c1", Role: presenters.RoleUser, Status: presenters.MessageComplete}); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckMessageIDsFree(ctx, "c1", "", "free"); err != nil {
			t.Errorf("free ids: %v", err)
		}
		for _, session := range []string{"c1", "c2"} {
			if err := s.CheckMessageIDsFree(ctx, session, "free", "taken"); !errors.Is(err, presenters.ErrMessageIDInUse) {
				t.Errorf("an id taken (checked from %s): %v, want ErrMessageIDInUse", session, err)
			}
		}
	})
}

// A database from before the event log gets an empty one, beside the history it keeps.
func TestMigration4AddsTheEventLog(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "old.db"))
	all := migrations
	migrations = all[:3]
	err := migrate(ctx, db)
	migrations = all
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`INSERT INTO conversations (id, agent_id, created_at, updated_at) VALUES ('old-session', 'acp.test.agent', 1, 1)`).Error; err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var version int
	if err := db.Raw(`SELECT MAX(version) FROM transcript_schema_migrations`).Scan(&version).Error; err != nil || version != len(migrations) {
		t.Fatalf("schema version = %d, %v; want %d", version, err, len(migrations))
	}
	if _, err := s.GetConversation(ctx, "old-session"); err != nil {
		t.Errorf("the session stored before: %v", err)
	}
	if oldest, newest, err := s.EventLogRange(ctx); err != nil || oldest != 0 || newest != 0 {
		t.Fatalf("event log range = %d, %d, %v; want an empty log", oldest, newest, err)
	}
	if err := s.AppendEvents(ctx, []LoggedEvent{{Sequence: 7, SessionID: "old-session", AgentID: "acp.test.agent", Type: 5, MessageID: "m", Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	var indexes []string
	if err := db.Raw(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'event_log' ORDER BY name`).Scan(&indexes).Error; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(indexes, []string{"event_log_by_session"}) {
		t.Errorf("event_log indexes = %v", indexes)
	}
}

// The Postgres schema has the SQLite schema's tables, columns (with their NOT NULLs) and
// named indexes, and every braced word of the migrations has its spelling in each
// dialect.
func TestPostgresSchemaMatchesSQLite(t *testing.T) {
	for _, d := range []dialect{sqliteDialect, postgresDialect} {
		for i, step := range migrationSteps(d) {
			if word := regexp.MustCompile(`\{[a-z]+\}`).FindString(step); word != "" {
				t.Fatalf("migration %d leaves %s unspelt in dialect %d", i+1, word, d)
			}
		}
	}
	shape := func(e engine) []string {
		_, db := e.openStore(t)
		var columns, indexes []string
		if dialectOf(db) == postgresDialect {
			columns = pluck(t, db, `SELECT table_name || '.' || column_name || CASE WHEN is_nullable = 'NO' THEN ' not null' ELSE '' END
				FROM information_schema.columns WHERE table_schema = current_schema()`)
			indexes = pluck(t, db, `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()
				AND indexname NOT LIKE '%\_pkey' AND indexname NOT LIKE '%\_key'`)
		} else {
			columns = pluck(t, db, `SELECT m.name || '.' || p.name || CASE WHEN p."notnull" OR p.pk > 0 THEN ' not null' ELSE '' END
				FROM sqlite_master AS m, pragma_table_info(m.name) AS p WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\_%' ESCAPE '\'`)
			indexes = pluck(t, db, `SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite\_autoindex%' ESCAPE '\'`)
		}
		slices.Sort(columns)
		slices.Sort(indexes)
		return append(columns, indexes...)
	}
	lite, pg := shape(engines[0]), shape(engines[1])
	if !slices.Equal(lite, pg) {
		t.Errorf("schemas differ:\nSQLite:   %v\nPostgres: %v", lite, pg)
	}
}

func pluck(t *testing.T, db *gorm.DB, query string) []string {
	t.Helper()
	var out []string
	if err := db.Raw(query).Scan(&out).Error; err != nil {
		t.Fatal(err)
	}
	return out
}
