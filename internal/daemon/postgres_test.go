package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/pgtest"
	"github.com/agenticd/agenticd/service/replicas"
)

// With database set to a Postgres URL, agenticd keeps its sessions there rather than in
// a SQLite file: a DeepChat turn made through one server is read back over gRPC from
// another started on the same database with an empty data dir, and neither wrote a
// SQLite file.
func TestSessionRoundTripOnPostgres(t *testing.T) {
	_, dsn := pgtest.StartForTest(t)
	llm := newFakeLLM(t, "stored in postgres")
	setEnv(t, map[string]string{EnvOpenAIBaseURL: llm.URL + "/v1", EnvOpenAIModel: "local-model", EnvOllamaHost: closedAddr(t)})
	ctx := context.Background()

	cfg := testConfig(t)
	cfg.Database = dsn
	cfg.Token = replicaToken
	first, err := Start(ctx, cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = first.Stop(ctx)
		}
	})
	conn, err := grpc.NewClient(first.Addr(), clientOptions(first)...)
	if err != nil {
		t.Fatal(err)
	}
	session, reply := running{client: pb.NewAgenticServiceClient(conn), roots: cfg.WorkspaceRoots}.turn(t, DefaultDeepChatID, "hi")
	_ = conn.Close()
	if reply != "stored in postgres" {
		t.Fatalf("reply %q", reply)
	}
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = true

	again := cfg
	again.DataDir = t.TempDir()
	d := startDaemon(t, again)
	listed, err := d.client.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed.GetSessions()) != 1 || listed.GetSessions()[0].GetSessionId() != session.GetSessionId() {
		t.Fatalf("the second server lists %v; want the session %s made through the first", listed.GetSessions(), session.GetSessionId())
	}
	msgs, err := d.client.ListMessages(ctx, &pb.ListMessagesRequest{SessionId: session.GetSessionId(), Order: pb.MessageOrder_MESSAGE_ORDER_OLDEST_FIRST})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range msgs.GetMessages() {
		for _, b := range m.GetBlocks() {
			texts = append(texts, m.GetRole().String()+": "+b.GetText().GetText())
		}
	}
	if got := strings.Join(texts, " | "); got != "MESSAGE_ROLE_USER: hi | MESSAGE_ROLE_ASSISTANT: stored in postgres" {
		t.Errorf("stored history: %s", got)
	}
	for _, dir := range []string{cfg.DataDir, again.DataDir} {
		if _, err := os.Stat(filepath.Join(dir, DatabaseFile)); !os.IsNotExist(err) {
			t.Errorf("%s was made beside a Postgres database (stat: %v)", filepath.Join(dir, DatabaseFile), err)
		}
	}
}

// database takes a postgres:// URL with a host and a database name, and an error about
// it never shows the URL's password.
func TestDatabaseConfig(t *testing.T) {
	path := writeFile(t, "database: postgres://agenticd:s3cret@db.example:5432/agenticd?sslmode=require\n")
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database != "postgres://agenticd:s3cret@db.example:5432/agenticd?sslmode=require" {
		t.Fatalf("database = %q", cfg.Database)
	}
	for _, ok := range []string{"", cfg.Database, "postgresql://u@localhost/db"} {
		if err := checkDatabase(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"mysql://u:s3cret@h/db":     "is not a postgres:// URL",
		"/var/lib/agenticd.db":      "is not a postgres:// URL",
		"postgres://u:s3cret@h":     "lacks a host or a database name",
		"postgres://u:s3cret@/db":   "lacks a host or a database name",
		"host=h password=s3cret x=": "is not a postgres:// URL",
	} {
		err := checkDatabase(bad)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want an error saying it %s", bad, err, want)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: the error shows the password: %v", bad, err)
		}
	}
	bad := testConfig(t)
	bad.Database = "postgres://nowhere"
	bad.Token = replicaToken
	if _, err := Start(context.Background(), bad, quiet); err == nil || !strings.Contains(err.Error(), "database:") {
		t.Errorf("Start with a bad database: %v", err)
	}
}

// A replica's store calls give up within its lease ttl: a caller of a replica cut off
// from the database hears UNAVAILABLE, and tries again, before its session could move.
// (At a ttl of 1 s, the least allowed, the stall bound is at its floor, the ttl itself.)
func TestPostgresLimitsBoundCallsWithinTheLeaseTTL(t *testing.T) {
	for _, ttl := range []time.Duration{2 * time.Second, 3 * time.Second, replicas.DefaultLeaseTTL, time.Minute} {
		l := postgresLimits(ttl)
		if l.Call <= 0 || l.Call >= ttl || l.Stall >= l.Call {
			t.Errorf("lease ttl %s: a store call is bounded at %s, the stall at %s; want the stall below the call's bound, below the ttl", ttl, l.Call, l.Stall)
		}
	}
}
