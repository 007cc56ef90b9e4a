package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// BenchmarkTranscriptSaveMessage: one finished assistant message (one transaction) into
// a real SQLite file in WAL mode, by text size.
func BenchmarkTranscriptSaveMessage(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("text=%dKiB", size>>10), func(b *testing.B) {
			ctx := context.Background()
			st, err := store.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			now := time.Now()
			if err := st.CreateConversation(ctx, store.Conversation{ID: "s1", AgentID: "deepchat.bench", Workspace: "/tmp",
				CreatedAt: now, UpdatedAt: now}); err != nil {
				b.Fatal(err)
			}
			text := strings.Repeat("y", size)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				err := st.SaveMessage(ctx, presenters.Message{ID: fmt.Sprintf("m%d", i), SessionID: "s1", Role: presenters.RoleAssistant,
					Status: presenters.MessageComplete, Blocks: []presenters.Block{{Type: presenters.BlockText, Text: text}}, CreatedAt: now})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
