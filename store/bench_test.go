package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agenticd/agenticd/presenters"
)

// BenchmarkCheckpointedTurn saves a turn the way a presenter checkpoints it: after
// each of 40 tool calls (each with a 64 KiB diff) the whole message so far is saved
// again, then once more as finished. One op is one whole turn.
func BenchmarkCheckpointedTurn(b *testing.B) {
	const tools = 40
	s, _ := openStore(b)
	ctx := context.Background()
	mustCreate(b, s, "c1", "deepchat.bench")
	file := strings.Repeat("some line of a source file\n", (64<<10)/27)
	n := 0
	for b.Loop() {
		n++
		m := presenters.Message{ID: fmt.Sprintf("m%d", n), SessionID: "c1", Role: presenters.RoleAssistant, Status: StatusInProgress}
		for i := range tools {
			m.Blocks = append(m.Blocks, presenters.Block{Type: presenters.BlockText, Text: fmt.Sprintf("Step %d. ", i)})
			result, _ := json.Marshal(fmt.Sprintf("Replaced 1 occurrence(s) in f%d.go.", i))
			m.Blocks = append(m.Blocks, presenters.Block{Type: presenters.BlockTool, Tool: &presenters.ToolCall{
				ToolID: fmt.Sprintf("call_%d", i), ToolName: "edit_file", Kind: presenters.ToolEdit, Status: presenters.ToolCompleted,
				Arguments: json.RawMessage(`{"path":"f.go","old_string":"a","new_string":"b"}`), Result: result,
				Content: []presenters.ToolContent{{Diff: &presenters.DiffBlock{Path: "/w/f.go", OldText: file, NewText: file + "x"}}},
			}})
			if err := s.SaveMessage(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
		m.Status = presenters.MessageComplete
		if err := s.SaveMessage(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}

// largeText is about n bytes (at most 3 fewer) of reply text with 2-, 3- and 4-byte
// characters in it, the way a model writes prose and code; it is valid UTF-8, as
// streamed text is.
func largeText(n int) string {
	const line = "Streaming a long reply: café, naïve, 文字化け, emoji 🚀, and some code `x := f(y)`.\n"
	return validPrefix(strings.Repeat(line, n/len(line)+1), n)
}

// validPrefix is the longest prefix of s of at most n bytes that ends where a character
// starts.
func validPrefix(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// BenchmarkSaveGrowingText saves one 20 MB reply the way a turn checkpoints it: ten
// saves in progress, each 2 MB longer than the last, then the final save. One op is the
// whole turn; B/op is what the saves allocate.
func BenchmarkSaveGrowingText(b *testing.B) {
	const checkpoints, total = 10, 20 << 20
	s, _ := openStore(b)
	ctx := context.Background()
	mustCreate(b, s, "c1", "deepchat.bench")
	text := largeText(total)
	n := 0
	b.ReportAllocs()
	b.SetBytes(total)
	for b.Loop() {
		n++
		m := presenters.Message{ID: fmt.Sprintf("m%d", n), SessionID: "c1", Role: presenters.RoleAssistant, Status: StatusInProgress}
		for i := 1; i <= checkpoints; i++ {
			m.Blocks = []presenters.Block{{Type: presenters.BlockText, Text: validPrefix(text, total/checkpoints*i)}}
			if err := s.SaveMessage(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
		m.Status = presenters.MessageComplete
		if err := s.SaveMessage(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSaveLargeText saves a new message holding one 20 MB text at once. Besides
// B/op it reports, where Linux lets a process reset its peak RSS, how far the process's
// peak RSS rose above its RSS before the save (the largest rise over all ops).
func BenchmarkSaveLargeText(b *testing.B) {
	const total = 20 << 20
	s, _ := openStore(b)
	ctx := context.Background()
	mustCreate(b, s, "c1", "deepchat.bench")
	text := largeText(total)
	n := 0
	var peakRise int64
	measured := true
	b.ReportAllocs()
	b.SetBytes(total)
	for b.Loop() {
		n++
		m := presenters.Message{ID: fmt.Sprintf("m%d", n), SessionID: "c1", Role: presenters.RoleAssistant, Status: presenters.MessageComplete,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: text}}}
		b.StopTimer()
		runtime.GC()
		debug.FreeOSMemory()
		before, ok := resetPeakRSS()
		measured = measured && ok
		b.StartTimer()
		if err := s.SaveMessage(ctx, m); err != nil {
			b.Fatal(err)
		}
		if peak, ok := procStatusKiB("VmHWM"); ok && measured {
			peakRise = max(peakRise, peak-before)
		}
	}
	if measured {
		b.ReportMetric(float64(peakRise)/1024, "peak-RSS-rise-MiB")
	}
}

// resetPeakRSS makes the process's peak RSS (VmHWM) its current RSS and returns that, in
// KiB; false where the kernel does not allow it.
func resetPeakRSS() (int64, bool) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0, false
	}
	return procStatusKiB("VmRSS")
}

// procStatusKiB reads one "Name: N kB" line of /proc/self/status.
func procStatusKiB(name string) (int64, bool) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, name+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kib, err == nil
		}
	}
	return 0, false
}

// BenchmarkSaveRequestAnswer is what keeping one answer costs a call with a request_id.
func BenchmarkSaveRequestAnswer(b *testing.B) {
	s, err := Open(context.Background(), b.TempDir()+"/agenticd.db")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	resp := make([]byte, 512)
	now := time.Now()
	b.ResetTimer()
	for i := range b.N {
		a := RequestAnswer{RequestID: fmt.Sprint(i), Method: "/agentic.v1.AgenticService/SendMessage", Fingerprint: make([]byte, 32),
			Response: resp, ExpiresUnixNano: now.Add(10 * time.Minute).UnixNano()}
		if err := s.SaveRequestAnswer(context.Background(), a, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimMessageSender is what recording a user message's sender costs each
// SendMessage that starts a turn, on each engine.
func BenchmarkClaimMessageSender(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			s, _ := e.openStore(b)
			ctx := context.Background()
			n := 0
			for b.Loop() {
				n++
				if _, err := s.ClaimMessageSender(ctx, "s1", fmt.Sprintf("u%d", n), "alice"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendEvents is one group commit of the event log as a paced turn makes them:
// a few events per batch (one op), every third batch with an audit entry, and as a flood
// makes them (a full statement of appendRows events and a remainder).
func BenchmarkAppendEvents(b *testing.B) {
	for _, n := range []int{5, appendRows + 37} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s, err := Open(context.Background(), b.TempDir()+"/agenticd.db")
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			data := make([]byte, 96)
			batch := make([]LoggedEvent, n)
			now := time.Now()
			seq := uint64(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				for j := range batch {
					seq++
					batch[j] = LoggedEvent{Sequence: seq, SessionID: "s1", AgentID: "acp.test.agent", Type: 5, MessageID: "m1", Time: now, Data: data}
				}
				var audit []AuditEntry
				if i%3 == 0 {
					audit = []AuditEntry{{Time: now, Kind: 1, SessionID: "s1", AgentID: "acp.test.agent", Data: data}}
				}
				if _, err := s.AppendFenced(context.Background(), batch, audit, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSessionOwnerAndGrants is what judging a principal's reach to a session costs
// the store on a call of a principal that is no admin: its owner record, then its ACL.
func BenchmarkSessionOwnerAndGrants(b *testing.B) {
	s, err := Open(context.Background(), b.TempDir()+"/agenticd.db")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	for i := range 1000 {
		if err := s.AddSessionOwner(ctx, SessionOwner{SessionID: fmt.Sprintf("s%04d", i), AgentID: "acp.test.agent", Workspace: "/w", CreatedUnixNano: int64(i), Creator: "alice"}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.SetSessionGrants(ctx, "s0500", []SessionGrant{{Grantee: GranteePrincipal("bob")}, {Grantee: GranteeGroup("devs"), Write: true}}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if rec, err := s.SessionOwner(ctx, "s0500"); err != nil || rec.Creator != "alice" {
			b.Fatal(rec, err)
		}
		if grants, err := s.SessionGrants(ctx, []string{"s0500"}); err != nil || len(grants["s0500"]) != 2 {
			b.Fatal(grants, err)
		}
	}
}
