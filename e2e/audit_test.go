package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// DeepChat's tools run in agenticd's sandbox, so its audit entries are what agenticd
// did: the file's size and hash are those of the file on disk, the command's exit code is
// the command's.
func TestAuditOfDeepChatTools(t *testing.T) {
	s, llm, ws := startDeepChat(t)
	sid := dcSession(t, s, ws, "permissive")
	events := dcSubscribe(t, s, sid)
	llm.script(dcTools(
		dcCall{"call_w", "write_file", `{"path":"notes.txt","content":"audited\n"}`},
		dcCall{"call_c", "run_command", `{"command":"echo hi; exit 3"}`},
	), dcText("Done."))
	sent := dcSend(t, s, sid, "write and run")
	events.Until(t, dcIsEnd(sent.GetMessageId()))

	data, err := os.ReadFile(filepath.Join(ws, "notes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	var write *agenticv1.AuditFileWrite
	var command *agenticv1.AuditCommand
	deadline := time.Now().Add(eventWait)
	for write == nil || command == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the audit log lacks the write (%v) or the command (%v)", write, command)
		}
		time.Sleep(20 * time.Millisecond) // the log writer appends a few milliseconds after the events
		resp, err := s.Client.ListAuditEvents(context.Background(), &agenticv1.ListAuditEventsRequest{SessionIds: []string{sid},
			Kinds: []agenticv1.AuditKind{agenticv1.AuditKind_AUDIT_KIND_FILE_WRITE, agenticv1.AuditKind_AUDIT_KIND_COMMAND}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetEvents() {
			if e.GetSource() != agenticv1.AuditSource_AUDIT_SOURCE_OBSERVED {
				t.Errorf("a DeepChat entry not observed by agenticd: %v", e)
			}
			if w := e.GetFileWrite(); w != nil {
				write = w
			}
			if c := e.GetCommand(); c != nil {
				command = c
			}
		}
	}
	if write.GetPath() != filepath.Join(ws, "notes.txt") && write.GetPath() != "notes.txt" {
		t.Errorf("write of %q, want notes.txt", write.GetPath())
	}
	if write.GetBytes() != int64(len(data)) || write.GetSha256() != hex.EncodeToString(sum[:]) {
		t.Errorf("write entry %d bytes sha256 %s; the file has %d bytes sha256 %x", write.GetBytes(), write.GetSha256(), len(data), sum)
	}
	if command.GetCommandLine() != "echo hi; exit 3" || command.ExitCode == nil || command.GetExitCode() != 3 || command.GetDuration() == nil {
		t.Errorf("command entry %v", command)
	}
}
