package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/transcript"
)

// BenchmarkTranscriptSaveMessage: one finished assistant message (one transaction) into
// a real SQLite file in WAL mode, by text size.
func BenchmarkTranscriptSaveMessage(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("text=%dKiB", size>>10), func(b *testing.B) {
			ctx := context.Background()
			db, err := transcript.OpenSQLite(filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			sqlDB, _ := db.DB()
			defer sqlDB.Close()
			store, err := transcript.New(ctx, db)
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			if err := store.CreateConversation(ctx, transcript.Conversation{ID: "s1", AgentID: "deepchat.bench", Workspace: "/tmp",
				CreatedAt: now, UpdatedAt: now}); err != nil {
				b.Fatal(err)
			}
			text := strings.Repeat("y", size)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				err := store.SaveMessage(ctx, presenters.Message{ID: fmt.Sprintf("m%d", i), SessionID: "s1", Role: presenters.RoleAssistant,
					Status: presenters.MessageComplete, Blocks: []presenters.Block{{Type: presenters.BlockText, Text: text}}, CreatedAt: now})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
