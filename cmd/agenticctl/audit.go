package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// auditPollInterval is how often `audit --follow` asks for new entries.
const auditPollInterval = time.Second

func cmdAudit(c *cli, args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	var sessions, agents, kindNames stringList
	fs.Var(&sessions, "session", "only this session's entries (repeatable)")
	fs.Var(&agents, "agent", "only this agent's entries (repeatable)")
	fs.Var(&kindNames, "kind", "only entries of this kind (repeatable): "+strings.Join(auditKindNames(), ", "))
	since := fs.String("since", "", "only entries from this time on: RFC 3339 (2026-11-25T10:00:00Z) or a duration back from now (90m, 24h)")
	until := fs.String("until", "", "only entries before this time (as --since)")
	follow := fs.Bool("follow", false, "after the entries there are, print new ones as they come (Ctrl-C stops)")
	asJSON := fs.Bool("json", false, "print each entry as one line of JSON")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	req := &pb.ListAuditEventsRequest{SessionIds: sessions, AgentIds: agents, PageSize: 1000}
	for _, name := range kindNames {
		k, ok := pb.AuditKind_value["AUDIT_KIND_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))]
		if !ok || k == 0 {
			return usagef("--kind %q is not one of %s", name, strings.Join(auditKindNames(), ", "))
		}
		req.Kinds = append(req.Kinds, pb.AuditKind(k))
	}
	now := time.Now()
	for _, t := range []struct {
		flag, value string
		into        **timestamppb.Timestamp
	}{{"--since", *since, &req.StartTime}, {"--until", *until, &req.EndTime}} {
		if t.value == "" {
			continue
		}
		at, err := parseAuditTime(t.value, now)
		if err != nil {
			return usagef("%s: %v", t.flag, err)
		}
		*t.into = timestamppb.New(at)
	}
	ctx := context.Background()
	if *follow {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt)
		defer stop()
	}
	for {
		callCtx, cancel := context.WithTimeout(ctx, c.timeout)
		resp, err := c.client.ListAuditEvents(callCtx, req)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range resp.GetEvents() {
			line := auditLine(e)
			if *asJSON {
				b, err := protojson.Marshal(e)
				if err != nil {
					return err
				}
				line = string(b)
			}
			if _, err := fmt.Fprintln(c.stdout, line); err != nil {
				return err
			}
			req.AfterId = e.GetId()
		}
		if resp.GetMore() {
			continue
		}
		if !*follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(auditPollInterval):
		}
	}
}

// parseAuditTime reads an RFC 3339 time, or a duration back from now.
func parseAuditTime(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: give a positive duration, which counts back from now", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-11-25T10:00:00Z) nor a duration (90m, 24h)", s)
	}
	return t, nil
}

// auditKindNames are the --kind values, in the proto's order.
func auditKindNames() []string {
	var names []string
	for i := int32(1); ; i++ {
		name, ok := pb.AuditKind_name[i]
		if !ok {
			return names
		}
		names = append(names, enumName(name, "AUDIT_KIND_"))
	}
}

// auditLine is an entry as audit prints it: id, time, kind, session (or agent), and what
// was done.
func auditLine(e *pb.AuditEvent) string {
	about := e.GetSessionId()
	if about == "" {
		about = "agent " + e.GetAgentId()
	}
	kind := enumName(e.GetKind().String(), "AUDIT_KIND_")
	line := fmt.Sprintf("%d %s %s %s", e.GetId(), e.GetEventTime().AsTime().Local().Format(time.DateTime), about, kind)
	if e.GetSource() == pb.AuditSource_AUDIT_SOURCE_REPORTED {
		line += " (reported by the agent)"
	}
	var detail string
	switch d := e.GetDetail().(type) {
	case *pb.AuditEvent_Session:
		detail = strings.TrimSpace(d.Session.GetWorkspace() + " " + d.Session.GetReason())
	case *pb.AuditEvent_FileWrite:
		w := d.FileWrite
		switch {
		case w.GetDeleted():
			detail = w.GetPath() + " deleted"
		case w.Bytes != nil:
			detail = fmt.Sprintf("%s %d bytes sha256:%s", w.GetPath(), w.GetBytes(), w.GetSha256())
		default:
			detail = w.GetPath()
		}
	case *pb.AuditEvent_Command:
		cmd := d.Command
		detail = fmt.Sprintf("%q", cmd.GetCommandLine())
		if cmd.GetCwd() != "" {
			detail += " in " + cmd.GetCwd()
		}
		if cmd.GetDenied() {
			detail += " denied: it never ran"
		}
		if cmd.ExitCode != nil {
			detail += fmt.Sprintf(" exit %d", cmd.GetExitCode())
		}
		if cmd.GetDuration() != nil {
			detail += " after " + cmd.GetDuration().AsDuration().Round(time.Millisecond).String()
		}
	case *pb.AuditEvent_Permission:
		p := d.Permission
		detail = p.GetPermissionId()
		if e.GetKind() == pb.AuditKind_AUDIT_KIND_PERMISSION_REQUESTED {
			detail += " " + strings.TrimSpace(p.GetDescription()+" "+p.GetCommandLine()+" "+strings.Join(p.GetPaths(), " "))
			break
		}
		verdict := "denied"
		if p.GetGranted() {
			verdict = "granted"
		}
		detail += fmt.Sprintf(" %s (%s) by %s", verdict, p.GetOptionId(), enumName(p.GetDecidedBy().String(), "PERMISSION_DECIDER_"))
		if p.GetClientAddress() != "" || p.GetClientIdentity() != "" {
			detail += fmt.Sprintf(" from %s with %s", p.GetClientAddress(), p.GetClientIdentity())
		}
		if p.GetReason() != "" {
			detail += ": " + p.GetReason()
		}
	case *pb.AuditEvent_Denial:
		detail = d.Denial.GetPermissionId() + ": " + d.Denial.GetReason()
	case *pb.AuditEvent_Elicitation:
		el := d.Elicitation
		detail = el.GetElicitationId()
		if e.GetKind() == pb.AuditKind_AUDIT_KIND_ELICITATION_REQUESTED {
			detail += " " + strings.TrimSpace(el.GetMessage()+" "+el.GetUrl())
			break
		}
		detail += fmt.Sprintf(" %s by %s", enumName(el.GetAction().String(), "ELICITATION_ACTION_"),
			enumName(el.GetDecidedBy().String(), "ELICITATION_DECIDER_"))
		if len(el.GetAnsweredFields()) > 0 {
			detail += " (" + strings.Join(el.GetAnsweredFields(), ", ") + ")"
		}
		if el.GetClientAddress() != "" || el.GetClientIdentity() != "" {
			detail += fmt.Sprintf(" from %s with %s", el.GetClientAddress(), el.GetClientIdentity())
		}
		if el.GetReason() != "" {
			detail += ": " + el.GetReason()
		}
	case *pb.AuditEvent_Webhook:
		detail = webhookDetail(d.Webhook)
	}
	if detail = strings.TrimSpace(detail); detail != "" {
		line += " " + detail
	}
	return line
}

// webhookDetail says what became of a webhook delivery: "turn_ended to ops (hooks.example.com)
// delivered, attempt 1, HTTP 204", or how many were dropped.
func webhookDetail(w *pb.AuditWebhook) string {
	outcome := enumName(w.GetOutcome().String(), "WEBHOOK_OUTCOME_")
	if w.GetOutcome() == pb.WebhookOutcome_WEBHOOK_OUTCOME_DROPPED {
		return fmt.Sprintf("%d deliveries dropped: the queue was full", w.GetDropped())
	}
	detail := fmt.Sprintf("%s to %s (%s) %s, attempt %d", enumName(w.GetEvent().String(), "WEBHOOK_EVENT_"), w.GetHook(), w.GetHost(), outcome, w.GetAttempt())
	if w.GetHttpStatus() != 0 {
		detail += fmt.Sprintf(", HTTP %d", w.GetHttpStatus())
	}
	if w.GetError() != "" {
		detail += ": " + w.GetError()
	}
	return detail
}
