package store

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

func TestSequenceFloorNeverGoesDown(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		if floor, err := s.SequenceFloor(ctx); err != nil || floor != 0 {
			t.Fatalf("floor of a new database = %d, %v; want 0", floor, err)
		}
		for _, f := range []uint64{10, 30, 20} {
			if err := s.SetSequenceFloor(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		if floor, err := s.SequenceFloor(ctx); err != nil || floor != 30 {
			t.Errorf("floor = %d, %v; want 30", floor, err)
		}
	})
}

// A session id belongs to the first agent that records it: the same agent may record it
// again (not as a new record), another agent may not.
func TestSessionOwnerIsTheFirstAgent(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		rec := SessionOwner{SessionID: "s1", AgentID: "acp.a", Workspace: "/w", CreatedUnixNano: 5}
		for i, wantNew := range []bool{true, false} {
			if isNew, err := s.RecordSessionOwner(ctx, rec); err != nil || isNew != wantNew {
				t.Fatalf("RecordSessionOwner by its owner, time %d: new %v, %v; want new %v", i+1, isNew, err, wantNew)
			}
		}
		if err := s.AddSessionOwner(ctx, rec); err != nil {
			t.Fatalf("AddSessionOwner by its owner: %v", err)
		}
		other := rec
		other.AgentID, other.Workspace = "acp.b", "/elsewhere"
		err := s.AddSessionOwner(ctx, other)
		if !errors.Is(err, presenters.ErrFailedPrecondition) || !strings.Contains(err.Error(), "already belongs to agent acp.a") {
			t.Fatalf("AddSessionOwner by another agent: %v; want ErrFailedPrecondition naming acp.a", err)
		}
		got, err := s.SessionOwner(ctx, "s1")
		rec.Creator = OwnerPrincipal // a record without a creator is the owner's
		if err != nil || got != rec {
			t.Fatalf("SessionOwner = %+v, %v; want %+v", got, err, rec)
		}
		if _, err := s.SessionOwner(ctx, "nope"); !errors.Is(err, presenters.ErrNotFound) {
			t.Fatalf("SessionOwner of an unknown session: %v; want ErrNotFound", err)
		}
	})
}

// ListSessions walks every session in pages, most recently updated first (a session
// without a stored conversation counts as updated when created), ties by session id.
func TestListSessionsByUpdateInPages(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		var ids []string
		for i := range 1203 { // more than two IN batches for KnownSessions
			agent := "acp.a"
			if i%3 == 0 {
				agent = "acp.b"
			}
			id := fmt.Sprintf("s%04d", i)
			ids = append(ids, id)
			// Two sessions per timestamp: ties are ordered by session id.
			if err := s.AddSessionOwner(ctx, SessionOwner{SessionID: id, AgentID: agent, Workspace: "/w", CreatedUnixNano: int64(i / 2)}); err != nil {
				t.Fatal(err)
			}
		}
		// The oldest session was updated last: it comes first.
		if err := s.CreateConversation(ctx, Conversation{ID: "s0000", AgentID: "acp.b", CreatedAt: time.Unix(0, 0), UpdatedAt: time.Unix(0, 5000)}); err != nil {
			t.Fatal(err)
		}
		var listed []string
		var after *SessionCursor
		for {
			page, err := s.ListSessions(ctx, SessionFilter{}, 100, after)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page {
				listed = append(listed, r.SessionID)
			}
			if len(page) < 100 {
				break
			}
			c := page[len(page)-1].Cursor()
			after = &c
		}
		// Without s0000: by creation (i/2) descending, then id ascending.
		want := []string{"s0000"}
		for i := len(ids) - 1; i >= 1; i-- {
			if i%2 == 1 && i > 1 {
				want = append(want, ids[i-1], ids[i])
				i--
				continue
			}
			want = append(want, ids[i])
		}
		if !reflect.DeepEqual(listed, want) {
			t.Fatalf("paged listing has %d sessions, first %v; want all %d, first %v", len(listed), listed[:min(5, len(listed))], len(want), want[:5])
		}
		ofB, err := s.ListSessions(ctx, SessionFilter{AgentID: "acp.b"}, 1000, nil)
		if err != nil || len(ofB) != 401 || ofB[0].SessionID != "s0000" || ofB[0].UpdatedUnixNano != 5000 || ofB[1].SessionID != "s1200" {
			t.Fatalf("acp.b's sessions: %d, first %+v, %v; want 401 from s0000 then s1200", len(ofB), ofB[:min(2, len(ofB))], err)
		}
		known, err := s.KnownSessions(ctx, append(ids, "unknown"))
		if err != nil || len(known) != len(ids) || known["unknown"] || !known["s0000"] || !known["s1202"] {
			t.Fatalf("KnownSessions: %d known (unknown: %v), %v; want exactly the %d recorded", len(known), known["unknown"], err, len(ids))
		}
	})
}

// Each filter narrows the listing in the query.
func TestListSessionsFilters(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		for i, rec := range []SessionOwner{
			{SessionID: "a1", AgentID: "acp.a", Workspace: "/w/one"},
			{SessionID: "a2", AgentID: "acp.a", Workspace: "/w/two"},
			{SessionID: "b1", AgentID: "acp.b", Workspace: "/w/one"},
		} {
			rec.CreatedUnixNano = int64(10 * (i + 1))
			if err := s.AddSessionOwner(ctx, rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateConversation(ctx, Conversation{ID: "a1", AgentID: "acp.a", CreatedAt: time.Unix(0, 10), UpdatedAt: time.Unix(0, 100)}); err != nil {
			t.Fatal(err)
		}
		list := func(f SessionFilter) string {
			t.Helper()
			got, err := s.ListSessions(ctx, f, 10, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, l := range got {
				out = append(out, l.SessionID)
			}
			return strings.Join(out, ",")
		}
		for _, c := range []struct {
			f    SessionFilter
			want string
		}{
			{SessionFilter{}, "a1,b1,a2"},
			{SessionFilter{AgentID: "acp.a"}, "a1,a2"},
			{SessionFilter{Workspace: "/w/one"}, "a1,b1"},
			{SessionFilter{UpdatedAfter: 20}, "a1,b1"},
			{SessionFilter{UpdatedAfter: 30}, "a1"},
			{SessionFilter{AgentID: "acp.b", Workspace: "/w/two"}, ""},
		} {
			if got := list(c.f); got != c.want {
				t.Errorf("%+v listed %q, want %q", c.f, got, c.want)
			}
		}
	})
}

// Open owns its database: Close closes it, after which the store refuses to work.
func TestOpenedStoreClosesItsDatabase(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "agenticd.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SequenceFloor(ctx); err == nil || !strings.Contains(err.Error(), "database is closed") {
		t.Fatalf("read after Close: %v; want the database closed", err)
	}
	// New does not own its database: Close leaves it open for its owner.
	db := openDB(t, filepath.Join(t.TempDir(), "shared.db"))
	shared, err := New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("SELECT 1").Error; err != nil {
		t.Fatalf("the database New was given was closed by Close: %v", err)
	}
}

// schema lists a database's tables and indexes as SQLite stores their definitions, with
// the space SQLite keeps before a column GORM added (", `col`") dropped.
func schema(t *testing.T, db *gorm.DB) []string {
	t.Helper()
	var defs []string
	if err := db.Raw(`SELECT type || ' ' || name || ': ' || COALESCE(sql, '') FROM sqlite_master ORDER BY type, name`).Scan(&defs).Error; err != nil {
		t.Fatal(err)
	}
	for i, d := range defs {
		defs[i] = strings.ReplaceAll(d, ", `", ",`")
	}
	return defs
}

// testdata/schema2.db.gz is a database written by the release before the store package
// (schema migration 2, the registry's tables created by the service), holding two session
// owners, a sequence floor of 300000 and one conversation: a user message, a reply whose
// text is stored in parts, and a reply left in progress. It opens unchanged: the same
// tables, indexes and rows, and the same schema a new database gets.
func TestDatabaseOfThePreviousReleaseOpens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agenticd.db")
	unzip(t, "testdata/schema2.db.gz", path)

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// Open brings the previous release's schema up to date: the same as a new database's.
	_, db := openStore(t)
	if after, fresh := schema(t, s.db), schema(t, db); !reflect.DeepEqual(after, fresh) {
		t.Errorf("after Open the previous release's schema differs from a new database's:\nafter %q\nnew   %q", after, fresh)
	}

	if floor, err := s.SequenceFloor(ctx); err != nil || floor != 300000 {
		t.Errorf("floor = %d, %v; want 300000", floor, err)
	}
	owners, err := s.ListSessions(ctx, SessionFilter{}, 10, nil)
	if err != nil || len(owners) != 2 || owners[0].SessionID != "s-chat" || owners[1].AgentID != "acp.test.agent" || owners[1].Workspace != "/w/acp" {
		t.Errorf("session owners = %+v, %v", owners, err)
	}
	conv, err := s.GetConversation(ctx, "s-chat")
	if err != nil || conv.Title != "fixture" || conv.ModeID != "balanced" || conv.AgentID != "deepchat.default" {
		t.Errorf("conversation = %+v, %v", conv, err)
	}
	if marked, err := s.MarkInterrupted(ctx); err != nil || len(marked) != 1 || marked[0].SessionID != "s-chat" {
		t.Errorf("MarkInterrupted = %+v, %v; want the one reply left in progress", marked, err)
	}
	msgs, err := s.Messages(ctx, "s-chat", presenters.MessageQuery{})
	if err != nil || len(msgs) != 3 {
		t.Fatalf("Messages: %d, %v; want 3", len(msgs), err)
	}
	wantLong := strings.Repeat("long text ", 60000)
	if msgs[0].Blocks[0].Text != "hello" || msgs[1].Blocks[0].Text != wantLong || msgs[2].Blocks[0].Text != "cut short" {
		t.Errorf("texts read back wrong: %q, %d bytes, %q", msgs[0].Blocks[0].Text, len(msgs[1].Blocks[0].Text), msgs[2].Blocks[0].Text)
	}
	if msgs[1].Status != presenters.MessageComplete || msgs[2].Status != presenters.MessageIncomplete {
		t.Errorf("statuses %s, %s; want complete, incomplete", msgs[1].Status, msgs[2].Status)
	}
	// The store still writes there: a new session and a reply.
	if err := s.AddSessionOwner(ctx, SessionOwner{SessionID: "s-new", AgentID: "acp.test.agent", Workspace: "/w/acp", CreatedUnixNano: 1}); err != nil {
		t.Error(err)
	}
	if err := s.SaveMessage(ctx, presenters.Message{ID: "m4", SessionID: "s-chat", Role: presenters.RoleUser, Status: presenters.MessageComplete,
		Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "again"}}}); err != nil {
		t.Error(err)
	}
}

func unzip(t *testing.T, from, to string) {
	t.Helper()
	f, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
