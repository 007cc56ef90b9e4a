package store

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

func TestSplitTextCutsWhereCharactersStart(t *testing.T) {
	for _, tc := range []struct {
		s     string
		limit int
		want  []string
	}{
		{"", 4, []string{""}},
		{"abc", 4, []string{"abc"}},
		{"abcd", 4, []string{"abcd"}},
		{"abcde", 4, []string{"abcd", "e"}},
		{"abcdefghi", 4, []string{"abcd", "efgh", "i"}},
		{"abcé", 4, []string{"abc", "é"}},                                         // 2-byte character across the cut
		{"ab€x", 4, []string{"ab", "€x"}},                                         // 3 bytes
		{"a🚀b", 4, []string{"a", "🚀", "b"}},                                       // 4 bytes
		{"🚀🚀", 4, []string{"🚀", "🚀"}},                                             // a cut right before a character stays
		{"aaaé", 2, []string{"aa", "a", "é"}},                                     // small limits still cut at character starts...
		{"🚀", 2, []string{"\xf0\x9f", "\x9a\x80"}},                                // ...unless a character is longer than the limit
		{"\x80\x80\x80\x80\x80\x80", 4, []string{"\x80\x80\x80\x80", "\x80\x80"}}, // not UTF-8: cut at the limit
	} {
		if got := splitText(nil, tc.s, tc.limit); !slices.Equal(got, tc.want) {
			t.Errorf("splitText(%q, %d) = %q, want %q", tc.s, tc.limit, got, tc.want)
		}
	}
	L := textPartBytes
	for _, r := range []string{"é", "€", "🚀"} {
		for shift := range len(r) {
			s := strings.Repeat("a", L-shift) + r + "b"
			got := splitText(nil, s, L)
			if len(got) != 2 || strings.Join(got, "") != s || !utf8.ValidString(got[0]) || !utf8.ValidString(got[1]) {
				t.Errorf("%d-byte character at %d: parts of %d and %d bytes", len(r), L-shift, len(got[0]), len(got[1]))
			}
		}
	}
}

// checkSplit checks splitText's promises on s, and that s+more keeps s's parts but its
// last.
func checkSplit(t *testing.T, s, more string, limit int) {
	t.Helper()
	parts := splitText(nil, s, limit)
	if strings.Join(parts, "") != s {
		t.Fatalf("splitText(%q, %d) = %q: does not join back", s, limit, parts)
	}
	for i, p := range parts {
		if len(p) > limit || p == "" && len(parts) > 1 {
			t.Fatalf("splitText(%q, %d): part %d is %q", s, limit, i, p)
		}
		if limit >= utf8.UTFMax && utf8.ValidString(s) && !utf8.ValidString(p) {
			t.Fatalf("splitText(%q, %d): part %d %q cuts a character", s, limit, i, p)
		}
	}
	longer := splitText(nil, s+more, limit)
	if len(longer) < len(parts) || !slices.Equal(longer[:len(parts)-1], parts[:len(parts)-1]) {
		t.Fatalf("splitText(%q, %d) = %q but with %q appended %q: earlier parts changed", s, limit, parts, more, longer)
	}
}

func FuzzSplitText(f *testing.F) {
	for _, seed := range []struct {
		s, more string
		limit   uint8
	}{
		{"", "", 1}, {"abc", "def", 3}, {"abcé", "🚀🚀", 4}, {"文字化け", "€", 5}, {"\xff\xfe\x80", "é", 4},
		{strings.Repeat("🚀", 9), "a", 7}, {"aé€🚀", strings.Repeat("x", 40), 6},
	} {
		f.Add(seed.s, seed.more, seed.limit)
	}
	f.Fuzz(func(t *testing.T, s, more string, limit uint8) {
		checkSplit(t, s, more, int(limit%16)+1)
	})
}

func TestStatementsBoundRowsAndBytes(t *testing.T) {
	sizes := []int{10, statementBytes - 10, 1, statementBytes * 3, 5}
	for range 120 {
		sizes = append(sizes, 100)
	}
	var got []int
	for batch := range statements(sizes, func(n int) int { return n }) {
		total := 0
		for _, n := range batch {
			total += n
		}
		if len(batch) == 0 || len(batch) > statementRows || total > statementBytes && len(batch) > 1 {
			t.Fatalf("a statement of %d rows, %d bytes", len(batch), total)
		}
		got = append(got, batch...)
	}
	if !slices.Equal(got, sizes) {
		t.Fatal("statements lost or reordered rows")
	}
}

// checkStoredParts checks what the tables hold of texts: every part belongs to a block and
// is within the count its block row gives, every count has all its parts, every part and
// every first part written since parts exist is at most textPartBytes long, and texts and
// payloads are stored as TEXT.
func checkStoredParts(t *testing.T, db *gorm.DB) {
	t.Helper()
	var stray, counted, stored, long, notText int64
	queries := []struct {
		n   *int64
		sql string
	}{
		{&stray, `SELECT COUNT(*) FROM block_text_parts AS p LEFT JOIN blocks AS b ON b.message_id = p.message_id AND b.position = p.position
			WHERE b.id IS NULL OR p.part < 1 OR p.part > b.text_parts`},
		{&counted, `SELECT COALESCE(SUM(text_parts), 0) FROM blocks`},
		{&stored, `SELECT COUNT(*) FROM block_text_parts`},
		{&long, `SELECT (SELECT COUNT(*) FROM block_text_parts WHERE length(CAST(text AS BLOB)) > ?) +
			(SELECT COUNT(*) FROM blocks WHERE length(CAST(text AS BLOB)) > ?)`},
		{&notText, `SELECT (SELECT COUNT(*) FROM block_text_parts WHERE typeof(text) <> 'text') +
			(SELECT COUNT(*) FROM blocks WHERE typeof(text) <> 'text' OR typeof(payload) <> 'text')`},
	}
	if dialectOf(db) == postgresDialect {
		// Postgres's columns hold only their type, so every text is TEXT.
		queries[3].sql = `SELECT (SELECT COUNT(*) FROM block_text_parts WHERE octet_length(text) > ?) +
			(SELECT COUNT(*) FROM blocks WHERE octet_length(text) > ?)`
		queries[4].sql = `SELECT 0`
	}
	for _, q := range queries {
		var args []any
		if q.n == &long {
			args = []any{textPartBytes, textPartBytes}
		}
		if err := db.Raw(q.sql, args...).Scan(q.n).Error; err != nil {
			t.Fatal(err)
		}
	}
	if stray != 0 || counted != stored || long != 0 || notText != 0 {
		t.Fatalf("stored parts: %d stray, %d counted by blocks but %d stored, %d too long, %d not TEXT", stray, counted, stored, long, notText)
	}
}

// partsOf returns the numbers of the stored parts of one block's text.
func partsOf(t *testing.T, db *gorm.DB, messageID string, position int) []int {
	t.Helper()
	var parts []int
	if err := db.Raw(`SELECT part FROM block_text_parts WHERE message_id = ? AND position = ? ORDER BY part`, messageID, position).
		Scan(&parts).Error; err != nil {
		t.Fatal(err)
	}
	return parts
}

// saveAndReadBack saves m and checks that the session's message m.ID reads back equal.
func saveAndReadBack(t *testing.T, s *Store, db *gorm.DB, m presenters.Message) {
	t.Helper()
	if err := s.SaveMessage(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	checkStoredParts(t, db)
	got, err := s.Messages(context.Background(), m.SessionID, presenters.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range got {
		if g.ID != m.ID {
			continue
		}
		if len(g.Blocks) != len(m.Blocks) {
			t.Fatalf("read back %d blocks, want %d", len(g.Blocks), len(m.Blocks))
		}
		for i := range m.Blocks {
			want := m.Blocks[i]
			want.Text = validUTF8(want.Text)
			if !reflect.DeepEqual(g.Blocks[i], want) {
				t.Fatalf("block %d read back with a text of %d bytes, want %d (equal prefix %d)", i,
					len(g.Blocks[i].Text), len(want.Text), commonPrefix(g.Blocks[i].Text, want.Text))
			}
		}
		return
	}
	t.Fatalf("message %s not read back", m.ID)
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestLongTextsRoundTrip(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, db := e.openStore(t)
		mustCreate(t, s, "c1", "deepchat.default")
		L := textPartBytes
		prose := largeText(12*L + L/2)
		texts := map[string]string{
			"empty":              "",
			"short":              "hello",
			"one part exactly":   strings.Repeat("x", L),
			"one byte over":      strings.Repeat("x", L+1),
			"three parts":        strings.Repeat("y", 3*L),
			"many parts":         prose,
			"2-byte at the cut":  strings.Repeat("a", L-1) + "é" + strings.Repeat("b", L),
			"3-byte at the cut":  strings.Repeat("a", L-2) + "€" + strings.Repeat("b", 2*L),
			"4-byte at the cut":  strings.Repeat("a", L-3) + "🚀" + strings.Repeat("b", L),
			"4-byte cuts":        strings.Repeat("🚀", L),
			"invalid at the cut": strings.Repeat("a", L-1) + "\xe2\x82" + strings.Repeat("b", L),
		}
		names := slices.Sorted(maps.Keys(texts))
		for i, name := range names {
			m := presenters.Message{ID: fmt.Sprintf("m%d", i), SessionID: "c1", Role: presenters.RoleAssistant, Status: presenters.MessageComplete,
				Blocks: []presenters.Block{
					{Type: presenters.BlockReasoning, Text: texts[name]},
					toolBlock("t", presenters.ToolCompleted, "diff"),
					{Type: presenters.BlockText, Text: texts[name] + "!"},
				}}
			t.Run(name, func(t *testing.T) { saveAndReadBack(t, s, db, m) })
		}
		var parts int64
		if err := db.Raw(`SELECT text_parts FROM blocks WHERE message_id = ? AND position = 0`,
			fmt.Sprintf("m%d", slices.Index(names, "many parts"))).Scan(&parts).Error; err != nil || parts != 12 {
			t.Fatalf("a text of 12.5 parts has text_parts %d (%v), want 12", parts, err)
		}
	})
}

// logTextWrites installs triggers that log every text part written ("position.part";
// part 0 is the blocks row's own text) and returns a function that takes (and clears)
// that log.
func logTextWrites(t *testing.T, db *gorm.DB) func() []string {
	t.Helper()
	stmts := []string{
		`CREATE TABLE text_writes (position INTEGER NOT NULL, part INTEGER NOT NULL)`,
		`CREATE TRIGGER log_head_insert AFTER INSERT ON blocks BEGIN INSERT INTO text_writes VALUES (NEW.position, 0); END`,
		`CREATE TRIGGER log_head_update AFTER UPDATE OF text ON blocks BEGIN INSERT INTO text_writes VALUES (NEW.position, 0); END`,
		`CREATE TRIGGER log_part_insert AFTER INSERT ON block_text_parts BEGIN INSERT INTO text_writes VALUES (NEW.position, NEW.part); END`,
		`CREATE TRIGGER log_part_update AFTER UPDATE ON block_text_parts BEGIN INSERT INTO text_writes VALUES (NEW.position, NEW.part); END`,
	}
	if dialectOf(db) == postgresDialect {
		stmts = []string{
			`CREATE TABLE text_writes (position BIGINT NOT NULL, part BIGINT NOT NULL)`,
			`CREATE FUNCTION log_head_write() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN INSERT INTO text_writes VALUES (NEW.position, 0); RETURN NULL; END $$`,
			`CREATE FUNCTION log_part_write() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN INSERT INTO text_writes VALUES (NEW.position, NEW.part); RETURN NULL; END $$`,
			`CREATE TRIGGER log_head_insert AFTER INSERT ON blocks FOR EACH ROW EXECUTE FUNCTION log_head_write()`,
			`CREATE TRIGGER log_head_update AFTER UPDATE OF text ON blocks FOR EACH ROW EXECUTE FUNCTION log_head_write()`,
			`CREATE TRIGGER log_part_write AFTER INSERT OR UPDATE ON block_text_parts FOR EACH ROW EXECUTE FUNCTION log_part_write()`,
		}
	}
	for _, stmt := range stmts {
		if err := db.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
	return func() []string {
		t.Helper()
		var rows []struct{ Position, Part int }
		if err := db.Raw(`SELECT position, part FROM text_writes ORDER BY position, part`).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Exec(`DELETE FROM text_writes`).Error; err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, fmt.Sprintf("%d.%d", r.Position, r.Part))
		}
		return out
	}
}

// A growing text is checkpointed by writing its last part and the new ones only.
func TestGrowingTextWritesOnlyChangedParts(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, db := e.openStore(t)
		mustCreate(t, s, "c1", "deepchat.default")
		writes := logTextWrites(t, db)
		L := textPartBytes
		text := largeText(7 * L)
		m := presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: StatusInProgress}
		step := func(name string, n int, want ...string) {
			t.Helper()
			m.Blocks = []presenters.Block{{Type: presenters.BlockText, Text: "Thinking. "}, {Type: presenters.BlockText, Text: validPrefix(text, n)}}
			saveAndReadBack(t, s, db, m)
			if got := writes(); !slices.Equal(got, want) {
				t.Errorf("%s: wrote parts %v, want %v", name, got, want)
			}
		}
		step("first save", 2*L+L/2, "0.0", "1.0", "1.1", "1.2")
		step("grew by 2.7 parts", 5*L+L/5, "1.2", "1.3", "1.4", "1.5")
		step("grew within its last part", 5*L+L/2, "1.5")
		step("nothing changed", 5*L+L/2)
		m.Status = presenters.MessageComplete
		step("final save", 5*L+L/2)
		if len(s.committed) != 0 {
			t.Fatal("a finished message is still tracked")
		}
		m.Status = StatusInProgress
		step("untracked: rewritten whole, shorter", L+L/2, "0.0", "1.0", "1.1")
		if got := partsOf(t, db, "a1", 1); !slices.Equal(got, []int{1}) {
			t.Fatalf("parts %v left after a rewrite to two parts", got)
		}
	})
}

// A text that shrinks, a block whose type changes, blocks dropped and a message written
// whole again leave no part behind.
func TestShrunkTextsLeaveNoParts(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, db := e.openStore(t)
		mustCreate(t, s, "c1", "deepchat.default")
		writes := logTextWrites(t, db)
		L := textPartBytes
		text := largeText(4 * L)
		m := presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: StatusInProgress,
			Blocks: []presenters.Block{
				{Type: presenters.BlockText, Text: validPrefix(text, 3*L+L/2)},
				{Type: presenters.BlockReasoning, Text: validPrefix(text, 2*L+L/2)},
				{Type: presenters.BlockText, Text: text},
			}}
		saveAndReadBack(t, s, db, m)
		writes()

		m.Blocks[0].Text = validPrefix(text, L+L/2)
		saveAndReadBack(t, s, db, m)
		if got := partsOf(t, db, "a1", 0); !slices.Equal(got, []int{1}) {
			t.Fatalf("shrunk text has parts %v, want [1]", got)
		}
		if got := writes(); !slices.Equal(got, []string{"0.1"}) {
			t.Errorf("shrinking wrote %v, want its new last part only", got)
		}

		m.Blocks[1] = toolBlock("t1", presenters.ToolInProgress, "diff")
		saveAndReadBack(t, s, db, m)
		if got := partsOf(t, db, "a1", 1); len(got) != 0 {
			t.Fatalf("a text block turned tool call kept parts %v", got)
		}

		m.Blocks = m.Blocks[:1]
		saveAndReadBack(t, s, db, m)
		if got := partsOf(t, db, "a1", 2); len(got) != 0 {
			t.Fatalf("a dropped block kept parts %v", got)
		}

		// A store that did not write the message rewrites it whole, deleting its blocks first.
		other, err := New(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		m.Blocks = []presenters.Block{{Type: presenters.BlockText, Text: "short now"}}
		saveAndReadBack(t, other, db, m)
		if got := partsOf(t, db, "a1", 0); len(got) != 0 {
			t.Fatalf("a text rewritten short kept parts %v", got)
		}
	})
}

// Deleting a conversation (or a message) deletes its texts' parts, through blocks.
func TestDeletingConversationDeletesParts(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, db := e.openStore(t)
		text := largeText(3 * textPartBytes)
		for _, c := range []string{"c1", "c2"} {
			mustCreate(t, s, c, "deepchat.default")
			for _, id := range []string{c + "-a", c + "-b"} {
				if err := s.SaveMessage(context.Background(), presenters.Message{ID: id, SessionID: c, Role: presenters.RoleAssistant,
					Status: presenters.MessageComplete, Blocks: []presenters.Block{{Type: presenters.BlockText, Text: text}}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := db.Exec(`DELETE FROM conversations WHERE id = 'c1'`).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Exec(`DELETE FROM messages WHERE id = 'c2-a'`).Error; err != nil {
			t.Fatal(err)
		}
		var left []string
		if err := db.Raw(`SELECT DISTINCT message_id FROM block_text_parts ORDER BY message_id`).Scan(&left).Error; err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(left, []string{"c2-b"}) {
			t.Fatalf("parts left of messages %v, want only c2-b's", left)
		}
		checkStoredParts(t, db)
	})
}

// A database written before texts were stored in parts (migration 1 only) reads as it
// did after the migration, long texts included, and its messages can be saved again.
func TestFirstSchemaDatabaseReadsAfterMigration(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "h.db"))
	stmts := []string{`CREATE TABLE transcript_schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`}
	stmts = append(stmts, strings.Split(migrationSteps(sqliteDialect)[0], ";")...)
	stmts = append(stmts, `INSERT INTO transcript_schema_migrations VALUES (1, 0)`)
	for _, stmt := range stmts {
		if strings.TrimSpace(stmt) != "" {
			if err := db.Exec(stmt).Error; err != nil {
				t.Fatal(err)
			}
		}
	}
	long := largeText(3*textPartBytes + 100) // whole in one cell, as the first release wrote it
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO conversations (id, agent_id, created_at, updated_at) VALUES ('c1', 'deepchat.default', 1, 1)`, nil},
		{`INSERT INTO messages (id, conversation_id, role, status, created_at, updated_at) VALUES ('a1', 'c1', 'assistant', 'complete', 2, 2)`, nil},
		{`INSERT INTO blocks (message_id, position, type, text) VALUES ('a1', 0, 'reasoning', 'short'), ('a1', 1, 'text', ?)`, []any{long}},
		{`INSERT INTO blocks (message_id, position, type, tool_id, tool_name, tool_status, raw_arguments, payload)
			VALUES ('a1', 2, 'tool', 't1', 'run', 'completed', '{"a":1}', '{"toolId":"t1","toolName":"run"}')`, nil},
	} {
		if err := db.Exec(stmt.sql, stmt.args...).Error; err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Messages(context.Background(), "c1", presenters.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Blocks) != 3 || got[0].Blocks[0].Text != "short" || got[0].Blocks[1].Text != long ||
		got[0].Blocks[2].Tool == nil || string(got[0].Blocks[2].Tool.Arguments) != `{"a":1}` {
		t.Fatalf("first-schema message read back as %+v", got)
	}
	m := got[0]
	m.Status = StatusInProgress
	m.Blocks[1].Text += " and more"
	saveAndReadBack(t, s, db, m)
	if got := partsOf(t, db, "a1", 1); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("the old long text saved again has parts %v, want [1 2 3]", got)
	}
}

// A read while a turn checkpoints a long text sees one whole checkpoint: every part of
// every block from the same save.
func TestReadsDoNotTearLongTexts(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, db := e.openStore(t)
		mustCreate(t, s, "c1", "deepchat.default")
		L := textPartBytes
		const saves = 24
		version := func(i int) presenters.Message {
			mark := string(rune('a' + i%26))
			return presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: StatusInProgress,
				Blocks: []presenters.Block{
					{Type: presenters.BlockText, Text: strings.Repeat(mark, L+(i%3)*L+i)},
					{Type: presenters.BlockReasoning, Text: strings.Repeat(mark, 2*L-i)},
				}}
		}
		if err := s.SaveMessage(context.Background(), version(0)); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		wg.Go(func() {
			defer close(done)
			for i := 1; i < saves; i++ {
				if err := s.SaveMessage(context.Background(), version(i)); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for reads := 0; ; reads++ {
				select {
				case <-done:
					if reads > 0 {
						return
					}
				default:
				}
				got, err := s.Messages(context.Background(), "c1", presenters.MessageQuery{})
				if err != nil {
					errs <- err
					return
				}
				mark := got[0].Blocks[0].Text[:1]
				i := int(mark[0] - 'a')
				if want := version(i); !reflect.DeepEqual(got[0].Blocks, want.Blocks) {
					errs <- fmt.Errorf("read %d: texts of %d and %d bytes are not checkpoint %d's", reads,
						len(got[0].Blocks[0].Text), len(got[0].Blocks[1].Text), i)
					return
				}
			}
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		checkStoredParts(t, db)
	})
}

// A missing part fails the read rather than returning a text with a hole in it.
func TestMissingTextPartIsReported(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, db := e.openStore(t)
		mustCreate(t, s, "c1", "deepchat.default")
		if err := s.SaveMessage(context.Background(), presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant,
			Status: presenters.MessageComplete, Blocks: []presenters.Block{{Type: presenters.BlockText, Text: largeText(3 * textPartBytes)}}}); err != nil {
			t.Fatal(err)
		}
		if err := db.Exec(`DELETE FROM block_text_parts WHERE message_id = 'a1' AND part = 1`).Error; err != nil {
			t.Fatal(err)
		}
		_, err := s.Messages(context.Background(), "c1", presenters.MessageQuery{})
		if err == nil || !strings.Contains(err.Error(), "lacks its part 1 of 2") {
			t.Fatalf("read with a part missing: %v, want it reported", err)
		}
	})
}
