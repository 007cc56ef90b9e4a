package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/agenticd/agenticd/store"
)

// BenchmarkStartWith10kSessions measures Start until health answers SERVING, on a data
// dir whose database already records 10,000 sessions (and a reserved sequence floor).
func BenchmarkStartWith10kSessions(b *testing.B) {
	cfg := Config{Listen: "127.0.0.1:0", DataDir: b.TempDir(), WorkspaceRoots: []string{b.TempDir()}}
	seed(b, filepath.Join(cfg.DataDir, DatabaseFile), 10_000)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		srv, err := Start(ctx, cfg, quiet)
		if err != nil {
			b.Fatal(err)
		}
		conn, err := grpc.NewClient(srv.Addr(), clientOptions(srv)...)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			b.Fatalf("health: %v %v", resp, err)
		}
		b.StopTimer()
		_ = conn.Close()
		if err := srv.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func seed(b *testing.B, path string, sessions int) {
	db, err := store.OpenSQLite(path)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	}()
	st, err := store.New(context.Background(), db)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	if err := st.SetSequenceFloor(context.Background(), 12_345_678); err != nil {
		b.Fatal(err)
	}
	tx := db.Begin()
	now := time.Now().UnixNano()
	for i := range sessions {
		if err := tx.Exec("INSERT INTO session_owners (session_id, agent_id, workspace, created_unix_nano) VALUES (?, ?, ?, ?)",
			fmt.Sprintf("session-%05d", i), "deepchat.default", "/w", now+int64(i)).Error; err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit().Error; err != nil {
		b.Fatal(err)
	}
}
