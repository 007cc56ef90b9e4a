package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

func TestAuditLineShowsADeniedCommandAsDenied(t *testing.T) {
	e := &pb.AuditEvent{Id: 7, SessionId: "s", Kind: pb.AuditKind_AUDIT_KIND_COMMAND, Time: timestamppb.New(time.Unix(0, 0)),
		Detail: &pb.AuditEvent_Command{Command: &pb.AuditCommand{CommandLine: "rm -rf build", Cwd: "/ws", Denied: true, Status: pb.ToolStatus_TOOL_STATUS_FAILED}}}
	if got := auditLine(e); !strings.HasSuffix(got, ` s command "rm -rf build" in /ws denied: it never ran`) {
		t.Fatalf("audit line %q", got)
	}
	e.GetCommand().Denied = false
	if got := auditLine(e); strings.Contains(got, "denied") {
		t.Fatalf("a command that ran reads %q", got)
	}
}
