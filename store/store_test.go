package store

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/agenticd/agenticd/internal/pgtest"
	"github.com/agenticd/agenticd/presenters"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashWriterEnv) != "" {
		runCrashWriter()
		return
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if err := pgtest.StopShared(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}))
}

// engine is a database engine the store runs on, and how a test gets a new database of
// it.
type engine struct {
	name string
	open func(t testing.TB) *gorm.DB
}

// engines are the engines every test that runs onEachEngine runs on: SQLite in a file of
// the test's own, and a schema of its own on the package's Postgres cluster (pgtest).
var engines = []engine{
	{"sqlite", func(t testing.TB) *gorm.DB {
		return openDB(t, filepath.Join(t.TempDir(), "nested", "dir", "history.db"))
	}},
	{"postgres", func(t testing.TB) *gorm.DB {
		t.Helper()
		db, err := OpenPostgres(context.Background(), pgtest.Shared(t).NewSchema(t))
		if err != nil {
			t.Fatalf("OpenPostgres: %v", err)
		}
		t.Cleanup(func() {
			sqlDB, _ := db.DB()
			_ = sqlDB.Close()
		})
		return db
	}},
}

// onEachEngine runs test as a subtest per engine, named after it.
func onEachEngine(t *testing.T, test func(t *testing.T, e engine)) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { test(t, e) })
	}
}

// openStore opens a store on a new database of the engine.
func (e engine) openStore(t testing.TB) (*Store, *gorm.DB) {
	t.Helper()
	db := e.open(t)
	s, err := New(context.Background(), db)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, db
}

func openDB(t testing.TB, path string) *gorm.DB {
	t.Helper()
	db, err := OpenSQLite(path)
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	t.Cleanup(func() {
		sqlDB, _ := db.DB()
		_ = sqlDB.Close()
	})
	return db
}

// openStore opens a store on a new SQLite database.
func openStore(t testing.TB) (*Store, *gorm.DB) {
	t.Helper()
	return engines[0].openStore(t)
}

// Every store on one database queues its writes on the same lock; a database opened
// some other way gets no shared lock (each caller serializes only its own writes).
func TestWriteLockIsOnePerDatabase(t *testing.T) {
	_, db := openStore(t)
	other := openDB(t, filepath.Join(t.TempDir(), "other.db"))
	if first, again := WriteLock(db), WriteLock(db); first != again || first == WriteLock(other) {
		t.Fatal("WriteLock is not one lock per database")
	}
	plain, err := gorm.Open(sqlite.Open(filepath.Join(t.TempDir(), "plain.db")), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sqlDB, _ := plain.DB()
		_ = sqlDB.Close()
	})
	if first, again := WriteLock(plain), WriteLock(plain); first == again {
		t.Error("a database not opened by OpenSQLite shares a lock between callers")
	}
}

func mustCreate(t testing.TB, s *Store, id, agent string) {
	t.Helper()
	if err := s.CreateConversation(context.Background(), Conversation{ID: id, AgentID: agent, Workspace: "/w"}); err != nil {
		t.Fatalf("CreateConversation(%s): %v", id, err)
	}
}

func TestOpenSQLiteUsesWALAndForeignKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "h.db")
	db := openDB(t, path)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file not created: %v", err)
	}
	var mode string
	var fk int
	if err := db.Raw("PRAGMA journal_mode").Scan(&mode).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Raw("PRAGMA foreign_keys").Scan(&fk).Error; err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || fk != 1 {
		t.Fatalf("journal_mode=%q foreign_keys=%d, want wal and 1", mode, fk)
	}
	if _, err := OpenSQLite(filepath.Join(t.TempDir(), "x?y.db")); err == nil {
		t.Fatal("a path with '?' must be refused")
	}
}

func TestMigrationsRunOnceAndRefuseNewerSchema(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		db := e.open(t)
		ctx := context.Background()
		for i := 0; i < 2; i++ {
			if _, err := New(ctx, db); err != nil {
				t.Fatalf("New #%d: %v", i+1, err)
			}
		}
		var versions []int
		if err := db.Raw("SELECT version FROM transcript_schema_migrations ORDER BY version").Scan(&versions).Error; err != nil {
			t.Fatal(err)
		}
		if len(versions) != len(migrations) {
			t.Fatalf("versions %v, want %d entries", versions, len(migrations))
		}
		if err := db.Exec("INSERT INTO transcript_schema_migrations (version, applied_at) VALUES (?, 0)", len(migrations)+1).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := New(ctx, db); err == nil || !strings.Contains(err.Error(), "newer agenticd") {
			t.Fatalf("New on a newer schema: %v, want a refusal naming the cause", err)
		}
	})
}

func TestConversationLifecycle(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		base := time.Unix(1_700_000_000, 0)
		c := Conversation{
			ID: "c1", AgentID: "deepchat.default", AgentSessionID: "agent-side-1", Workspace: "/ws", Title: "first", ModelID: "m1", ModeID: "balanced",
			CreatedAt: base, UpdatedAt: base,
			// A zero that was reported stays reported; an unreported count stays absent.
			Usage: presenters.TokenUsage{InputTokens: n(1), OutputTokens: n(0), TotalTokens: n(3), ReasoningTokens: n(5),
				ContextUsed: n(6), ContextSize: n(7), Cost: presenters.Reported(0.25), CostCurrency: "USD"},
		}
		if err := s.CreateConversation(ctx, c); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetConversation(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("GetConversation = %+v, want %+v", got, c)
		}
		err = s.CreateConversation(ctx, Conversation{ID: "c1", AgentID: "x"})
		if !errors.Is(err, ErrConversationExists) || !errors.Is(err, presenters.ErrInvalidArgument) {
			t.Fatalf("duplicate create: %v", err)
		}
		if err := s.CreateConversation(ctx, Conversation{ID: "", AgentID: "x"}); !errors.Is(err, presenters.ErrInvalidArgument) {
			t.Fatalf("create without id: %v", err)
		}

		c.Title, c.ModelID, c.ModeID, c.Closed = "renamed", "m2", "strict", true
		c.Usage = c.Usage.Add(presenters.TokenUsage{InputTokens: n(10), CachedInputTokens: n(0)})
		c.AgentSessionID = "agent-side-2" // reopened as a new agent session
		c.UpdatedAt = base.Add(time.Hour)
		if err := s.UpdateConversation(ctx, c); err != nil {
			t.Fatal(err)
		}
		got, _ = s.GetConversation(ctx, "c1")
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("after update = %+v, want %+v", got, c)
		}
		if _, err := s.GetConversation(ctx, "nope"); !errors.Is(err, presenters.ErrNotFound) {
			t.Fatalf("GetConversation(unknown): %v", err)
		}
		if err := s.UpdateConversation(ctx, Conversation{ID: "nope"}); !errors.Is(err, presenters.ErrNotFound) {
			t.Fatalf("UpdateConversation(unknown): %v", err)
		}
	})
}

func intPtr(i int) *int { return &i }

func n(v int64) *int64 { return &v }

// everyBlock has one block of each type with every field set, including raw JSON whose
// formatting must survive byte for byte.
func everyBlock() []presenters.Block {
	requested := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	return []presenters.Block{
		{Type: presenters.BlockText, Text: "hello <b>&</b> wörld\n"},
		{Type: presenters.BlockReasoning, Text: "thinking..."},
		{Type: presenters.BlockTool, Tool: &presenters.ToolCall{
			ToolID: "call_1", ToolName: "run_command", Title: "Run ls", Kind: presenters.ToolExecute,
			Status: presenters.ToolCompleted, Arguments: json.RawMessage(`{ "command" : "ls -la" }`),
			Result: json.RawMessage(`"plain string result"`), Error: "",
			Locations: []presenters.ToolLocation{{Path: "/ws/a.go", Line: 3}},
			Content: []presenters.ToolContent{
				{Text: "out"},
				{Diff: &presenters.DiffBlock{Path: "/ws/a.go", OldText: "a", NewText: "b"}},
				{Terminal: &presenters.TerminalBlock{TerminalID: "t1", Command: "ls", Output: "x\n", Truncated: true, ExitCode: intPtr(2), Signal: "", OutputOffset: 4096}},
				{Image: &presenters.ImageBlock{MimeType: "image/png", Base64: "AAAA"}},
				{Resource: &presenters.ResourceBlock{URI: "file:///ws/r", Name: "r", MimeType: "text/plain", Text: "rt"}},
			},
			CommandInfo: &presenters.CommandInfo{Command: "ls -la", RiskLevel: presenters.RiskLow, Reason: "reads", Suggestion: "none", Signature: "ls", BaseCommand: "ls"},
		}},
		{Type: presenters.BlockTool, Tool: &presenters.ToolCall{ToolID: "call_2", ToolName: "read_file", Kind: presenters.ToolRead, Status: presenters.ToolFailed, Error: "not found", Arguments: json.RawMessage(`[1, 2]`)}},
		{Type: presenters.BlockError, Error: &presenters.ErrorBlock{Message: "rate limited", Code: "provider_rate_limited"}},
		{Type: presenters.BlockImage, Image: &presenters.ImageBlock{MimeType: "image/jpeg", URL: "https://example.com/x.jpg"}},
		{Type: presenters.BlockAction, Action: &presenters.ActionBlock{ActionType: "permission_request", Description: "asked", Permission: &presenters.PermissionRequest{
			RequestID: "r1", ToolID: "call_1", ToolName: "run_command", PermissionType: presenters.PermissionCommand,
			Description: "run ls", CommandInfo: &presenters.CommandInfo{Command: "ls", RiskLevel: presenters.RiskMedium, Cwd: "/ws"},
			Paths: []string{"/ws"}, Diffs: []presenters.DiffBlock{{Path: "/ws/a.go", OldText: "a", NewText: "b"}}, Options: []presenters.PermissionOption{{ID: "allow_once", Name: "Allow once", Kind: presenters.AllowOnce}},
			Rememberable: true, ServerName: "srv", Arguments: json.RawMessage(`{"command":  "ls"}`), MessageID: "m", RequestedAt: requested,
		}}},
		{Type: presenters.BlockAction, Action: &presenters.ActionBlock{ActionType: "max_tool_rounds", Description: "stopped after 25 tool rounds"}},
		{Type: presenters.BlockSearch, Search: &presenters.SearchBlock{Query: "q", Results: []presenters.SearchResult{{Title: "t", URL: "u", Snippet: "s"}}}},
		{Type: presenters.BlockMcpUIResource, McpUIResource: &presenters.McpUIResourceBlock{URI: "ui://x", MimeType: "text/html", Text: "<p>"}},
		{Type: presenters.BlockPlan, Plan: &presenters.PlanBlock{Entries: []presenters.PlanEntry{{Content: "step", Status: "pending", Priority: "high"}}}},
		{Type: presenters.BlockDiff, Diff: &presenters.DiffBlock{Path: "/ws/new.txt", NewText: "new"}},
		{Type: presenters.BlockTerminal, Terminal: &presenters.TerminalBlock{TerminalID: "t2", Command: "sleep 9", Output: "", Signal: "SIGKILL"}},
		{Type: presenters.BlockResource, Resource: &presenters.ResourceBlock{URI: "file:///ws/b.bin", Name: "b.bin", MimeType: "application/octet-stream", Blob: "AAEC"}},
		{Type: presenters.BlockText, Text: ""},
	}
}

func TestSaveMessageRoundTripsEveryBlockType(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "deepchat.default")
		want := presenters.Message{
			ID: "m1", SessionID: "c1", Role: presenters.RoleAssistant, Status: presenters.MessageComplete,
			Blocks: everyBlock(), CreatedAt: time.Unix(1_700_000_000, 42), StopReason: presenters.StopEndTurn,
			Usage: &presenters.TokenUsage{InputTokens: n(5), OutputTokens: n(0), TotalTokens: n(5), Cost: presenters.Reported(0.5), CostCurrency: "USD"},
		}
		if err := s.SaveMessage(ctx, want); err != nil {
			t.Fatal(err)
		}
		got, err := s.Messages(ctx, "c1", presenters.MessageQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("got %d messages", len(got))
		}
		for i := range want.Blocks {
			if !reflect.DeepEqual(got[0].Blocks[i], want.Blocks[i]) {
				g, _ := json.Marshal(got[0].Blocks[i])
				w, _ := json.Marshal(want.Blocks[i])
				t.Errorf("block %d:\n got %s\nwant %s", i, g, w)
			}
		}
		if !reflect.DeepEqual(got[0], want) {
			t.Fatalf("message differs:\n got %+v\nwant %+v", got[0], want)
		}
		if string(got[0].Blocks[2].Tool.Arguments) != `{ "command" : "ls -la" }` {
			t.Fatalf("raw arguments re-formatted: %s", got[0].Blocks[2].Tool.Arguments)
		}
	})
}

func TestSaveMessageUpsertsWholeMessageAndKeepsItsPlace(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "deepchat.default")
		first := time.Unix(1_700_000_000, 0)
		user := presenters.Message{ID: "u1", SessionID: "c1", Role: presenters.RoleUser, Status: presenters.MessageComplete,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "hi"}}, CreatedAt: first}
		asst := presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: StatusInProgress, CreatedAt: first.Add(time.Second)}
		if err := s.SaveMessages(ctx, user, asst); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Messages(ctx, "c1", presenters.MessageQuery{})
		if len(got) != 2 || got[1].Status != presenters.MessageIncomplete || len(got[1].Blocks) != 0 {
			t.Fatalf("in-progress message reads as %+v, want incomplete with no blocks", got)
		}
		asst.Blocks = []presenters.Block{{Type: presenters.BlockReasoning, Text: "r"}, {Type: presenters.BlockText, Text: "par"}, {Type: presenters.BlockText, Text: "tial"}}
		if err := s.SaveMessage(ctx, asst); err != nil {
			t.Fatal(err)
		}
		// The user message is re-saved later: it must keep its place and creation time.
		user.CreatedAt = first.Add(time.Hour)
		user.Blocks = append(user.Blocks, presenters.Block{Type: presenters.BlockText, Text: " again"})
		if err := s.SaveMessage(ctx, user); err != nil {
			t.Fatal(err)
		}
		asst.Status, asst.StopReason = presenters.MessageComplete, presenters.StopEndTurn
		asst.Blocks = []presenters.Block{{Type: presenters.BlockText, Text: "final"}}
		if err := s.SaveMessage(ctx, asst); err != nil {
			t.Fatal(err)
		}
		got, _ = s.Messages(ctx, "c1", presenters.MessageQuery{})
		if len(got) != 2 || got[0].ID != "u1" || got[1].ID != "a1" {
			t.Fatalf("order = %+v", got)
		}
		if !got[0].CreatedAt.Equal(first) || len(got[0].Blocks) != 2 {
			t.Fatalf("user message = %+v, want created %v with 2 blocks", got[0], first)
		}
		if got[1].Status != presenters.MessageComplete || len(got[1].Blocks) != 1 || got[1].Blocks[0].Text != "final" || got[1].Usage != nil {
			t.Fatalf("assistant message = %+v", got[1])
		}
		if n, _ := s.CountMessages(ctx, "c1"); n != 2 {
			t.Fatalf("CountMessages = %d", n)
		}
	})
}

func TestSaveMessageRejectsBadInputAtomically(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "a")
		mustCreate(t, s, "c2", "a")
		good := presenters.Message{ID: "g", SessionID: "c1", Role: presenters.RoleUser, Status: presenters.MessageComplete,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "ok"}}}
		cases := []struct {
			name string
			msg  presenters.Message
			want error
		}{
			{"unknown session", presenters.Message{ID: "x", SessionID: "nope", Role: presenters.RoleUser, Status: presenters.MessageComplete}, presenters.ErrNotFound},
			{"missing status", presenters.Message{ID: "x", SessionID: "c1", Role: presenters.RoleUser}, presenters.ErrInvalidArgument},
			{"tool block without tool", presenters.Message{ID: "x", SessionID: "c1", Role: presenters.RoleAssistant, Status: presenters.MessageComplete,
				Blocks: []presenters.Block{{Type: presenters.BlockTool}}}, presenters.ErrInvalidArgument},
			{"diff block without diff", presenters.Message{ID: "x", SessionID: "c1", Role: presenters.RoleAssistant, Status: presenters.MessageComplete,
				Blocks: []presenters.Block{{Type: presenters.BlockDiff}}}, presenters.ErrInvalidArgument},
			{"unknown block type", presenters.Message{ID: "x", SessionID: "c1", Role: presenters.RoleAssistant, Status: presenters.MessageComplete,
				Blocks: []presenters.Block{{Type: "hologram"}}}, presenters.ErrInvalidArgument},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				err := s.SaveMessages(ctx, good, tc.msg)
				if !errors.Is(err, tc.want) {
					t.Fatalf("SaveMessages = %v, want %v", err, tc.want)
				}
				if n, _ := s.CountMessages(ctx, "c1"); n != 0 {
					t.Fatalf("a failed batch left %d messages", n)
				}
			})
		}
		if err := s.SaveMessage(ctx, good); err != nil {
			t.Fatal(err)
		}
		moved := good
		moved.SessionID = "c2"
		if err := s.SaveMessage(ctx, moved); !errors.Is(err, presenters.ErrMessageIDInUse) {
			t.Fatalf("saving a message under another session: %v", err)
		}
	})
}

func TestMessagesPaging(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "a")
		mustCreate(t, s, "empty", "a")
		var msgs []presenters.Message
		for i := 0; i < 10; i++ {
			msgs = append(msgs, presenters.Message{ID: fmt.Sprintf("m%d", i), SessionID: "c1", Role: presenters.RoleUser,
				Status: presenters.MessageComplete, Blocks: []presenters.Block{{Type: presenters.BlockText, Text: strconv.Itoa(i)}}})
		}
		if err := s.SaveMessages(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		ids := func(ms []presenters.Message) string {
			var out []string
			for _, m := range ms {
				out = append(out, m.ID)
			}
			return strings.Join(out, ",")
		}
		cases := []struct {
			q    presenters.MessageQuery
			want string
		}{
			{presenters.MessageQuery{}, "m0,m1,m2,m3,m4,m5,m6,m7,m8,m9"},
			{presenters.MessageQuery{Limit: 3}, "m7,m8,m9"},
			{presenters.MessageQuery{Limit: 3, BeforeMessageID: "m7"}, "m4,m5,m6"},
			{presenters.MessageQuery{BeforeMessageID: "m2"}, "m0,m1"},
			{presenters.MessageQuery{BeforeMessageID: "m0"}, ""},
			{presenters.MessageQuery{Limit: 50}, "m0,m1,m2,m3,m4,m5,m6,m7,m8,m9"},
		}
		for _, tc := range cases {
			got, err := s.Messages(ctx, "c1", tc.q)
			if err != nil {
				t.Fatalf("%+v: %v", tc.q, err)
			}
			if ids(got) != tc.want {
				t.Errorf("%+v = %s, want %s", tc.q, ids(got), tc.want)
			}
			for _, m := range got {
				if len(m.Blocks) != 1 || "m"+m.Blocks[0].Text != m.ID {
					t.Errorf("message %s has blocks %+v", m.ID, m.Blocks)
				}
			}
		}
		if _, err := s.Messages(ctx, "c1", presenters.MessageQuery{BeforeMessageID: "zz"}); !errors.Is(err, presenters.ErrNotFound) {
			t.Fatalf("unknown before id: %v", err)
		}
		if _, err := s.Messages(ctx, "nope", presenters.MessageQuery{}); !errors.Is(err, presenters.ErrNotFound) {
			t.Fatalf("unknown session: %v", err)
		}
		if got, err := s.Messages(ctx, "empty", presenters.MessageQuery{}); err != nil || len(got) != 0 {
			t.Fatalf("empty session: %v, %v", got, err)
		}
	})
}

func TestConcurrentWritersAndReaders(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		const writers, saves = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, writers*2)
		for w := 0; w < writers; w++ {
			conv := fmt.Sprintf("c%d", w)
			mustCreate(t, s, conv, "a")
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := 0; i < saves; i++ {
					m := presenters.Message{ID: conv + "-m", SessionID: conv, Role: presenters.RoleAssistant, Status: StatusInProgress,
						Blocks: []presenters.Block{{Type: presenters.BlockText, Text: strings.Repeat("x", i+1)}}}
					if err := s.SaveMessage(ctx, m); err != nil {
						errs <- err
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				for i := 0; i < saves; i++ {
					ms, err := s.Messages(ctx, conv, presenters.MessageQuery{})
					if err != nil {
						errs <- err
						return
					}
					if len(ms) > 1 || (len(ms) == 1 && len(ms[0].Blocks) != 1) {
						errs <- fmt.Errorf("reader saw a torn message: %+v", ms)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

const crashWriterEnv = "TRANSCRIPT_CRASH_WRITER_DB"

// runCrashWriter is the child of TestCrashMidTurnLeavesIncompleteMessage: it plays a turn
// that checkpoints a growing reply forever, printing each committed checkpoint, until the
// parent kills it.
func runCrashWriter() {
	ctx := context.Background()
	db, err := OpenSQLite(os.Getenv(crashWriterEnv))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	s, err := New(ctx, db)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if err := s.CreateConversation(ctx, Conversation{ID: "c1", AgentID: "deepchat.default"}); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	user := presenters.Message{ID: "u1", SessionID: "c1", Role: presenters.RoleUser, Status: presenters.MessageComplete,
		Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "do it"}}}
	asst := presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: StatusInProgress}
	if err := s.SaveMessages(ctx, user, asst); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var text strings.Builder
	for i := 0; ; i++ {
		text.WriteString(fmt.Sprintf("chunk %d. ", i))
		asst.Blocks = []presenters.Block{
			{Type: presenters.BlockText, Text: text.String()},
			{Type: presenters.BlockTool, Tool: &presenters.ToolCall{ToolID: "t1", ToolName: "run_command", Status: presenters.ToolInProgress, Arguments: json.RawMessage(`{"command":"make"}`)}},
		}
		if err := s.SaveMessage(ctx, asst); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("saved", i)
	}
}

func TestCrashMidTurnLeavesIncompleteMessage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashWriterEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	lastSaved := -1
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "error") {
			t.Fatalf("writer: %s", line)
		}
		if n, ok := strings.CutPrefix(line, "saved "); ok {
			lastSaved, _ = strconv.Atoi(n)
			if lastSaved >= 20 {
				break
			}
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no deferred cleanup runs
		t.Fatal(err)
	}
	_, _ = cmd.Process.Wait()
	if lastSaved < 20 {
		t.Fatalf("writer stopped early after checkpoint %d", lastSaved)
	}

	db := openDB(t, path)
	var integrity string
	if err := db.Raw("PRAGMA integrity_check").Scan(&integrity).Error; err != nil || integrity != "ok" {
		t.Fatalf("integrity_check = %q, %v", integrity, err)
	}
	s, err := New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	marked, err := s.MarkInterrupted(context.Background())
	if err != nil || len(marked) != 1 || marked[0] != (InterruptedMessage{SessionID: "c1", MessageID: "a1", AgentID: "deepchat.default"}) {
		t.Fatalf("MarkInterrupted = %+v, %v; want the assistant reply a1 of c1", marked, err)
	}
	msgs, err := s.Messages(context.Background(), "c1", presenters.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Status != presenters.MessageComplete || msgs[0].Blocks[0].Text != "do it" {
		t.Fatalf("user message not intact: %+v", msgs)
	}
	a := msgs[1]
	if a.Status != presenters.MessageIncomplete || len(a.Blocks) != 2 {
		t.Fatalf("assistant message = %+v, want incomplete with 2 blocks", a)
	}
	// The text is exactly some whole checkpoint: at least the last one reported.
	text := a.Blocks[0].Text
	var want strings.Builder
	for i := 0; i <= lastSaved; i++ {
		want.WriteString(fmt.Sprintf("chunk %d. ", i))
	}
	if !strings.HasPrefix(text, want.String()) || !strings.HasSuffix(text, ". ") {
		t.Fatalf("partial text is not a whole checkpoint at or after %d: %q...", lastSaved, text[max(0, len(text)-40):])
	}
	if tc := a.Blocks[1].Tool; tc.Status != presenters.ToolCancelled || string(tc.Arguments) != `{"command":"make"}` {
		t.Fatalf("unfinished tool call = %+v, want cancelled", tc)
	}
	if marked, _ := s.MarkInterrupted(context.Background()); len(marked) != 0 {
		t.Fatalf("second MarkInterrupted changed %+v", marked)
	}
}

// The batch reads answer for every stored id, across more ids than one query binds, and
// leave unknown ids out.
func TestGetConversationsAndCountsInBatches(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		var ids []string
		for i := range idBatch + 10 {
			id := fmt.Sprintf("c%04d", i)
			mustCreate(t, s, id, "agent")
			ids = append(ids, id)
		}
		last := ids[len(ids)-1]
		if err := s.SaveMessage(ctx, presenters.Message{ID: "m", SessionID: last, Role: presenters.RoleUser, Status: presenters.MessageComplete}); err != nil {
			t.Fatal(err)
		}
		convs, err := s.GetConversations(ctx, append(ids, "unknown"))
		if err != nil || len(convs) != len(ids) {
			t.Fatalf("GetConversations: %d conversations, %v; want %d", len(convs), err, len(ids))
		}
		seen := map[string]bool{}
		for _, c := range convs {
			seen[c.ID] = c.AgentID == "agent" && c.Workspace == "/w"
		}
		for _, id := range ids {
			if !seen[id] {
				t.Fatalf("conversation %s missing or wrong", id)
			}
		}
		counts, err := s.CountMessagesOf(ctx, append(ids, "unknown"))
		if err != nil || len(counts) != 1 || counts[last] != 1 {
			t.Fatalf("CountMessagesOf = %v, %v; want only %s: 1", counts, err, last)
		}
	})
}

// OpenOnPostgres owns its connections, as Open owns its file: Close closes them. A server
// it cannot reach is an error that says what to check and does not show the password.
func TestOpenOnPostgres(t *testing.T) {
	ctx := context.Background()
	s, err := OpenOnPostgres(ctx, pgtest.Shared(t).NewSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "c1", "deepchat.a")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SequenceFloor(ctx); err == nil || !strings.Contains(err.Error(), "database is closed") {
		t.Fatalf("read after Close: %v; want the database closed", err)
	}
	nowhere := fmt.Sprintf("postgres://agenticd:s3cret@127.0.0.1:%d/agenticd?sslmode=disable&connect_timeout=5", closedPort(t))
	_, err = OpenOnPostgres(ctx, nowhere)
	if err == nil || !strings.Contains(err.Error(), "check that the server runs") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("OpenOnPostgres on a closed port: %v; want an error saying what to check, without the password", err)
	}
}

// closedPort is a port of 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}
