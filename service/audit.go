package service

import (
	"cmp"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agenticd/agenticd/events"
	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// AuditRetention bounds the audit log: whichever bound is met first drops the oldest
// entries; 0 is no bound.
type AuditRetention struct {
	MaxEntries int64
	MaxAge     time.Duration
}

// Bounds of what the auditor keeps in memory between events: tool calls started and not
// yet ended (for a command's duration), the principals of sessions' current turns, and
// the notes of calls whose events have not come by. Past them the oldest go (the turns'
// principals all at once); an entry then lacks a duration, a client or a principal,
// nothing more.
const (
	maxOpenToolCalls    = 10_000
	maxTurnPrincipals   = 10_000
	maxNotedAnswers     = 10_000
	notedAnswerLifetime = 10 * time.Minute
)

// auditor makes audit entries from the events the event log appends, so that an entry
// is stored in the transaction of its event: never one without the other, none dropped.
// It runs on the hub's log writer, in sequence order, except note, forget and stamp
// (handlers and publishers), which touch only the notes.
type auditor struct {
	toolStarts map[string]*list.Element // of startOrder, by session id + tool id
	startOrder *list.List               // toolStart values, oldest first
	// turns is, by session id, the principal whose message started the session's
	// current turn (empty when unknown): what the turn's agent does is on its behalf.
	turns map[string]string

	mu sync.Mutex
	// answers are the calls in progress, noted before the presenter publishes what
	// they cause: by permissionKey, elicitationKey, loadKey, closeKey or senderKey.
	answers map[string]notedAnswer
}

// notedAnswer is who answered a permission request, until its decision event comes by.
type notedAnswer struct {
	address, identity, principal string
	at                           time.Time
}

// toolStart is when an open tool call started, and whether its permission was denied.
type toolStart struct {
	key    string
	at     time.Time
	denied bool
}

func newAuditor() *auditor {
	return &auditor{toolStarts: make(map[string]*list.Element), startOrder: list.New(), turns: make(map[string]string), answers: make(map[string]notedAnswer)}
}

// auditedTypes are the event types audit entries are made from; the rest (the deltas of
// a flood among them) are passed over without being decoded.
var auditedTypes = map[presenters.EventType]bool{
	presenters.EventSessionCreated:         true,
	presenters.EventSessionReady:           true,
	presenters.EventSessionClosed:          true,
	presenters.EventMessageEnd:             true, // a user message's sender starts a turn
	presenters.EventToolStart:              true,
	presenters.EventToolEnd:                true,
	presenters.EventToolPermissionRequired: true,
	presenters.EventToolPermissionGranted:  true,
	presenters.EventToolPermissionDenied:   true,
	presenters.EventElicitationRequired:    true,
	presenters.EventElicitationResolved:    true,
}

// permissionKey and elicitationKey are the keys of the answers noted for them.
func permissionKey(sessionID, permissionID string) string { return sessionID + "\x00" + permissionID }
func elicitationKey(sessionID, elicitationID string) string {
	return sessionID + "\x00elicitation\x00" + elicitationID
}

// loadKey, closeKey and senderKey are the keys of the notes of a LoadSession, a
// CloseSession and a SendMessage (by the user message's id) in progress.
func loadKey(sessionID string) string  { return sessionID + "\x00load" }
func closeKey(sessionID string) string { return sessionID + "\x00close" }
func senderKey(sessionID, userMessageID string) string {
	return sessionID + "\x00user\x00" + userMessageID
}

// note records who is answering a request (permissionKey, elicitationKey), before the
// presenter publishes the decision. When clients answer at once, the first noted keeps
// the note; it reports whether this call noted, so that a handler whose answer then lost
// takes its note back (forget).
func (a *auditor) note(ctx context.Context, key string) bool {
	n := notedAnswer{address: clientAddress(ctx), identity: clientIdentity(ctx), principal: callerOf(ctx).Name, at: time.Now()}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.answers) >= maxNotedAnswers {
		for k, v := range a.answers {
			if n.at.Sub(v.at) > notedAnswerLifetime {
				delete(a.answers, k)
			}
		}
	}
	if _, taken := a.answers[key]; taken || len(a.answers) >= maxNotedAnswers {
		return false
	}
	a.answers[key] = n
	return true
}

// forget takes back a note whose answer did not decide.
func (a *auditor) forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.answers, key)
}

// principalOf is the principal of the note under key, which stays.
func (a *auditor) principalOf(key string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.answers[key].principal
}

// stamp completes a payload that answers a call with the principal of the call's note:
// the events then say who acted, on every replica and in the log, and the audit entries
// made from them too. A user message's note is used up by its MESSAGE_END; the others
// are taken by their audit entry (decisions) or by their call when it returns.
func (a *auditor) stamp(sessionID string, p presenters.Payload) presenters.Payload {
	switch p := p.(type) {
	case presenters.PermissionGrantedPayload:
		if p.DecidedBy == presenters.DecidedByUser && p.Principal == "" {
			p.Principal = a.principalOf(permissionKey(sessionID, p.RequestID))
		}
		return p
	case presenters.PermissionDeniedPayload:
		if p.DecidedBy == presenters.DecidedByUser && p.Principal == "" {
			p.Principal = a.principalOf(permissionKey(sessionID, p.RequestID))
		}
		return p
	case presenters.ElicitationResolvedPayload:
		if p.DecidedBy == presenters.ElicitationByUser && p.Principal == "" {
			p.Principal = a.principalOf(elicitationKey(sessionID, p.ElicitationID))
		}
		return p
	case presenters.SessionReadyPayload:
		if p.Principal == "" {
			p.Principal = a.principalOf(loadKey(sessionID))
		}
		return p
	case presenters.SessionClosedPayload:
		if p.Principal == "" {
			p.Principal = a.principalOf(closeKey(sessionID))
		}
		return p
	case presenters.MessageEndPayload:
		if p.Role == presenters.RoleUser && p.Principal == "" {
			if n, ok := a.takeAnswer(senderKey(sessionID, p.MessageID)); ok {
				p.Principal = n.principal
			}
		}
		return p
	}
	return p
}

func (a *auditor) takeAnswer(key string) (notedAnswer, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.answers[key]
	delete(a.answers, key)
	return n, ok
}

// clientAddress is the network address of the caller.
func clientAddress(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// entries makes the audit entries of a batch of logged events. An event that does not
// decode is logged and left out of the audit (the event log keeps it).
func (a *auditor) entries(batch []events.LoggedEvent, logger *slog.Logger) []store.AuditEntry {
	var out []store.AuditEntry
	for _, le := range batch {
		if !auditedTypes[le.Type] {
			continue
		}
		var ev pb.AgenticEvent
		if err := proto.Unmarshal(le.Data, &ev); err != nil {
			logger.Error("an event could not be read for the audit log", "session_id", le.SessionID, "agent_id", le.AgentID, "sequence", le.Sequence, "err", err)
			continue
		}
		for _, e := range a.fromEvent(le, &ev) {
			data, err := proto.Marshal(e)
			if err != nil {
				logger.Error("an audit entry could not be encoded", "session_id", le.SessionID, "agent_id", le.AgentID, "sequence", le.Sequence, "err", err)
				continue
			}
			out = append(out, store.AuditEntry{Time: le.Time, Kind: int(e.GetKind()), SessionID: le.SessionID, AgentID: le.AgentID, Data: data})
		}
	}
	return out
}

// sourceOf says who did what an agent's tool calls show: agenticd itself for DeepChat,
// whose tools run in agenticd's sandbox; the agent for an ACP agent, which acts in its
// own process and reports it.
func sourceOf(agentID string) pb.AuditSource {
	if strings.HasPrefix(agentID, string(presenters.AgentTypeACP)+".") {
		return pb.AuditSource_AUDIT_SOURCE_REPORTED
	}
	return pb.AuditSource_AUDIT_SOURCE_OBSERVED
}

func (a *auditor) fromEvent(le events.LoggedEvent, ev *pb.AgenticEvent) []*pb.AuditEvent {
	// What the agent does in a turn is on behalf of the principal whose message started
	// it: entries of the agent's acts name that principal.
	turn := a.turns[le.SessionID]
	entry := func(kind pb.AuditKind, source pb.AuditSource, toolID string) *pb.AuditEvent {
		e := &pb.AuditEvent{EventTime: timestamppb.New(le.Time), Kind: kind, Source: source, SessionId: le.SessionID,
			AgentId: le.AgentID, ToolId: toolID, EventSequence: le.Sequence, Principal: turn}
		//lint:ignore SA1019 both names of the time are kept, for clients that still read the old one
		e.Time = e.EventTime
		return e
	}
	observed := pb.AuditSource_AUDIT_SOURCE_OBSERVED
	switch p := ev.GetPayload().(type) {
	case *pb.AgenticEvent_MessageEnd:
		if p.MessageEnd.GetRole() == pb.MessageRole_MESSAGE_ROLE_USER && !ev.GetReplay() {
			if len(a.turns) >= maxTurnPrincipals {
				clear(a.turns)
			}
			a.turns[le.SessionID] = p.MessageEnd.GetPrincipal()
		}
	case *pb.AgenticEvent_SessionCreated:
		e := entry(pb.AuditKind_AUDIT_KIND_SESSION_CREATED, observed, "")
		e.Principal = p.SessionCreated.GetSession().GetOwner()
		e.Detail = &pb.AuditEvent_Session{Session: &pb.AuditSession{Workspace: p.SessionCreated.GetSession().GetWorkspace()}}
		return []*pb.AuditEvent{e}
	case *pb.AgenticEvent_SessionReady:
		e := entry(pb.AuditKind_AUDIT_KIND_SESSION_LOADED, observed, "")
		e.Principal = p.SessionReady.GetPrincipal()
		e.Detail = &pb.AuditEvent_Session{Session: &pb.AuditSession{}}
		return []*pb.AuditEvent{e}
	case *pb.AgenticEvent_SessionClosed:
		delete(a.turns, le.SessionID)
		kind := pb.AuditKind_AUDIT_KIND_SESSION_CLOSED
		if p.SessionClosed.GetReason() == deletedReason {
			kind = pb.AuditKind_AUDIT_KIND_SESSION_DELETED
		}
		e := entry(kind, observed, "")
		e.Principal = p.SessionClosed.GetPrincipal()
		e.Detail = &pb.AuditEvent_Session{Session: &pb.AuditSession{Reason: p.SessionClosed.GetReason()}}
		return []*pb.AuditEvent{e}
	case *pb.AgenticEvent_ToolStart:
		a.started(le.SessionID, p.ToolStart.GetTool().GetToolId(), le.Time)
	case *pb.AgenticEvent_ToolEnd:
		return a.toolEnded(le, p.ToolEnd.GetTool(), entry)
	case *pb.AgenticEvent_ToolPermissionRequired:
		r := p.ToolPermissionRequired.GetRequest()
		e := entry(pb.AuditKind_AUDIT_KIND_PERMISSION_REQUESTED, observed, r.GetToolId())
		e.Detail = &pb.AuditEvent_Permission{Permission: &pb.AuditPermission{
			PermissionId: r.GetPermissionId(), Description: r.GetDescription(), PermissionType: r.GetPermissionType(),
			Paths: r.GetPaths(), CommandLine: r.GetCommandInfo().GetCommand()}}
		return []*pb.AuditEvent{e}
	case *pb.AgenticEvent_ToolPermissionGranted:
		g := p.ToolPermissionGranted
		return []*pb.AuditEvent{a.decided(le, entry(pb.AuditKind_AUDIT_KIND_PERMISSION_DECIDED, observed, g.GetToolId()),
			g.GetPermissionId(), g.GetOptionId(), true, g.GetDecidedBy(), g.GetReason(), g.GetPrincipal())}
	case *pb.AgenticEvent_ElicitationRequired:
		r := p.ElicitationRequired.GetRequest()
		e := entry(pb.AuditKind_AUDIT_KIND_ELICITATION_REQUESTED, observed, r.GetToolId())
		e.Detail = &pb.AuditEvent_Elicitation{Elicitation: &pb.AuditElicitation{
			ElicitationId: r.GetElicitationId(), Message: r.GetMessage(), Mode: r.GetMode(), Url: r.GetUrl()}}
		return []*pb.AuditEvent{e}
	case *pb.AgenticEvent_ElicitationResolved:
		r := p.ElicitationResolved
		d := &pb.AuditElicitation{ElicitationId: r.GetElicitationId(), Action: r.GetAction(), DecidedBy: r.GetDecidedBy(), Reason: r.GetReason()}
		for name := range r.GetContent().GetFields() {
			d.AnsweredFields = append(d.AnsweredFields, name)
		}
		slices.Sort(d.AnsweredFields)
		e := entry(pb.AuditKind_AUDIT_KIND_ELICITATION_RESOLVED, observed, r.GetToolId())
		e.Principal = ""
		if n, ok := a.takeAnswer(elicitationKey(le.SessionID, r.GetElicitationId())); ok && r.GetDecidedBy() == pb.ElicitationDecider_ELICITATION_DECIDER_USER {
			d.ClientAddress, d.ClientIdentity = n.address, n.identity
			e.Principal = cmp.Or(r.GetPrincipal(), n.principal)
		}
		e.Detail = &pb.AuditEvent_Elicitation{Elicitation: d}
		return []*pb.AuditEvent{e}
	case *pb.AgenticEvent_ToolPermissionDenied:
		d := p.ToolPermissionDenied
		a.denied(le.SessionID, d.GetToolId(), le.Time)
		out := []*pb.AuditEvent{a.decided(le, entry(pb.AuditKind_AUDIT_KIND_PERMISSION_DECIDED, observed, d.GetToolId()),
			d.GetPermissionId(), d.GetOptionId(), false, d.GetDecidedBy(), d.GetReason(), d.GetPrincipal())}
		if d.GetDecidedBy() == pb.PermissionDecider_PERMISSION_DECIDER_POLICY {
			e := entry(pb.AuditKind_AUDIT_KIND_POLICY_DENIAL, observed, d.GetToolId())
			e.Detail = &pb.AuditEvent_Denial{Denial: &pb.AuditDenial{PermissionId: d.GetPermissionId(), Reason: d.GetReason()}}
			out = append(out, e)
		}
		return out
	}
	return nil
}

// decided is a decision's entry, with the client that answered when one did.
func (a *auditor) decided(le events.LoggedEvent, e *pb.AuditEvent, permissionID, optionID string, granted bool, by pb.PermissionDecider, reason, principal string) *pb.AuditEvent {
	d := &pb.AuditPermission{PermissionId: permissionID, OptionId: optionID, Granted: granted, DecidedBy: by, Reason: reason}
	e.Principal = ""
	if by == pb.PermissionDecider_PERMISSION_DECIDER_USER {
		e.Principal = principal
	}
	if n, ok := a.takeAnswer(permissionKey(le.SessionID, permissionID)); ok && by == pb.PermissionDecider_PERMISSION_DECIDER_USER {
		d.ClientAddress, d.ClientIdentity = n.address, n.identity
		e.Principal = cmp.Or(principal, n.principal)
	}
	e.Detail = &pb.AuditEvent_Permission{Permission: d}
	return e
}

func (a *auditor) started(sessionID, toolID string, at time.Time) {
	key := sessionID + "\x00" + toolID
	if _, ok := a.toolStarts[key]; ok {
		return
	}
	if a.startOrder.Len() >= maxOpenToolCalls {
		oldest := a.startOrder.Front()
		delete(a.toolStarts, a.startOrder.Remove(oldest).(toolStart).key)
	}
	a.toolStarts[key] = a.startOrder.PushBack(toolStart{key: key, at: at})
}

// denied notes that an open tool call's permission was denied (a request may come
// before its tool call starts), so that its command entry says it never ran.
func (a *auditor) denied(sessionID, toolID string, at time.Time) {
	a.started(sessionID, toolID, at)
	el := a.toolStarts[sessionID+"\x00"+toolID]
	ts := el.Value.(toolStart)
	ts.denied = true
	el.Value = ts
}

// toolEnded makes the entries of a finished tool call: each file it wrote (from its
// diffs), or the command it ran.
func (a *auditor) toolEnded(le events.LoggedEvent, tool *pb.ToolCall, entry func(pb.AuditKind, pb.AuditSource, string) *pb.AuditEvent) []*pb.AuditEvent {
	key := le.SessionID + "\x00" + tool.GetToolId()
	var ts toolStart
	el, started := a.toolStarts[key]
	if started {
		ts = a.startOrder.Remove(el).(toolStart)
		delete(a.toolStarts, key)
	}
	source := sourceOf(le.AgentID)
	var out []*pb.AuditEvent
	switch tool.GetKind() {
	case pb.ToolKind_TOOL_KIND_EXECUTE:
		c := &pb.AuditCommand{CommandLine: commandLine(tool), Cwd: argument(tool, "cwd"), Status: tool.GetStatus()}
		for _, content := range tool.GetContent() {
			if t := content.GetTerminal(); t != nil && t.ExitCode != nil {
				c.ExitCode = t.ExitCode
			}
		}
		switch {
		case ts.denied && tool.GetStatus() != pb.ToolStatus_TOOL_STATUS_COMPLETED:
			c.Denied = true
		case started:
			c.Duration = durationpb.New(le.Time.Sub(ts.at))
		}
		e := entry(pb.AuditKind_AUDIT_KIND_COMMAND, source, tool.GetToolId())
		e.Detail = &pb.AuditEvent_Command{Command: c}
		out = append(out, e)
	case pb.ToolKind_TOOL_KIND_EDIT, pb.ToolKind_TOOL_KIND_DELETE, pb.ToolKind_TOOL_KIND_MOVE:
		if tool.GetStatus() != pb.ToolStatus_TOOL_STATUS_COMPLETED {
			return nil
		}
		for _, content := range tool.GetContent() {
			diff := content.GetDiff()
			if diff == nil {
				continue
			}
			w := &pb.AuditFileWrite{Path: diff.GetPath(), ToolTitle: tool.GetTitle()}
			if tool.GetKind() == pb.ToolKind_TOOL_KIND_DELETE {
				w.Deleted = true
			} else {
				sum := sha256.Sum256([]byte(diff.GetNewText()))
				w.Bytes, w.Sha256 = proto.Int64(int64(len(diff.GetNewText()))), hex.EncodeToString(sum[:])
			}
			e := entry(pb.AuditKind_AUDIT_KIND_FILE_WRITE, source, tool.GetToolId())
			e.Detail = &pb.AuditEvent_FileWrite{FileWrite: w}
			out = append(out, e)
		}
		if len(out) == 0 && tool.GetKind() == pb.ToolKind_TOOL_KIND_DELETE {
			for _, loc := range tool.GetLocations() {
				e := entry(pb.AuditKind_AUDIT_KIND_FILE_WRITE, source, tool.GetToolId())
				e.Detail = &pb.AuditEvent_FileWrite{FileWrite: &pb.AuditFileWrite{Path: loc.GetPath(), Deleted: true, ToolTitle: tool.GetTitle()}}
				out = append(out, e)
			}
		}
	}
	return out
}

// commandLine is what a command tool ran: the command the server classified, else the
// tool's terminal, else its "command" argument, else its title.
func commandLine(tool *pb.ToolCall) string {
	if c := tool.GetCommandInfo().GetCommand(); c != "" {
		return c
	}
	for _, content := range tool.GetContent() {
		if t := content.GetTerminal(); t != nil && t.GetCommand() != "" {
			return t.GetCommand()
		}
	}
	if c := argument(tool, "command"); c != "" {
		return c
	}
	return tool.GetTitle()
}

// argument is a string argument of a tool call (a list of strings is joined by spaces).
func argument(tool *pb.ToolCall, name string) string {
	v := tool.GetArguments().GetStructValue().GetFields()[name]
	if s := v.GetStringValue(); s != "" {
		return s
	}
	var parts []string
	for _, item := range v.GetListValue().GetValues() {
		parts = append(parts, item.GetStringValue())
	}
	return strings.Join(parts, " ")
}

// ListAuditEvents reads the audit log.
func (s *Service) ListAuditEvents(ctx context.Context, req *pb.ListAuditEventsRequest) (*pb.ListAuditEventsResponse, error) {
	const method = "ListAuditEvents"
	limit, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, s.fail(ctx, method, inField("page_size", err))
	}
	f := store.AuditFilter{SessionIDs: req.GetSessionIds(), AgentIDs: req.GetAgentIds(), AfterID: req.GetAfterId(),
		Reader: callerOf(ctx).reader()}
	fingerprint := auditFingerprint(req)
	if req.GetPageToken() != "" {
		after, err := decodeAuditPageToken(req.GetPageToken(), fingerprint)
		if err != nil {
			return nil, s.fail(ctx, method, inField("page_token", err))
		}
		f.AfterID = after
	}
	for i, k := range req.GetKinds() {
		if _, known := pb.AuditKind_name[int32(k)]; !known || k == pb.AuditKind_AUDIT_KIND_UNSPECIFIED {
			return nil, s.fail(ctx, method, invalidField(fmt.Sprintf("kinds[%d]", i), "kinds[%d] is %d, not a kind of audit entry: use the AuditKind values (SESSION_CREATED ... POLICY_DENIAL)", i, k))
		}
		f.Kinds = append(f.Kinds, int(k))
	}
	for _, t := range []struct {
		field string
		ts    *timestamppb.Timestamp
		into  *time.Time
	}{{"start_time", req.GetStartTime(), &f.Start}, {"end_time", req.GetEndTime(), &f.End}} {
		if t.ts == nil {
			continue
		}
		if err := t.ts.CheckValid(); err != nil {
			return nil, s.fail(ctx, method, invalidField(t.field, "%s is not a valid time: %v", t.field, err))
		}
		*t.into = t.ts.AsTime()
	}
	if !f.Start.IsZero() && !f.End.IsZero() && !f.End.After(f.Start) {
		return nil, s.fail(ctx, method, invalidField("end_time", "end_time (%s) must be after start_time (%s)", f.End.Format(time.RFC3339Nano), f.Start.Format(time.RFC3339Nano)))
	}
	rows, err := s.registry.store.AuditEntries(ctx, f, limit+1)
	if err != nil {
		return nil, s.fail(ctx, method, err)
	}
	resp := &pb.ListAuditEventsResponse{More: len(rows) > limit}
	for _, r := range rows[:min(len(rows), limit)] {
		var e pb.AuditEvent
		if err := proto.Unmarshal(r.Data, &e); err != nil {
			return nil, s.fail(ctx, method, fmt.Errorf("audit entry %d: %w", r.ID, err))
		}
		e.Id = r.ID
		fillAuditTimes(&e)
		resp.Events = append(resp.Events, &e)
	}
	if resp.More {
		resp.NextPageToken = encodeAuditPageToken(resp.Events[len(resp.Events)-1].GetId(), fingerprint)
	}
	return resp, nil
}

// fillAuditTimes gives an entry both names of its time: entries stored before
// event_time existed have only time.
func fillAuditTimes(e *pb.AuditEvent) {
	//lint:ignore SA1019 the deprecated name stays filled for the clients that read it
	old := e.Time
	switch {
	case e.EventTime == nil:
		e.EventTime = old
	case old == nil:
		//lint:ignore SA1019 as above
		e.Time = e.EventTime
	}
}

// auditPageToken is where a ListAuditEvents page continues: after an entry id, under the
// filters it was issued for. Opaque to clients like the other lists' tokens (base64url
// of this as JSON); the kind and the filters let a token given to another listing be
// refused rather than misread.
type auditPageToken struct {
	Kind    string `json:"k"`
	After   uint64 `json:"a"`
	Filters string `json:"f"`
}

const auditPageTokenKind = "audit"

// auditFingerprint identifies a ListAuditEvents request's filters (after_id included:
// a token continues the listing that started there).
func auditFingerprint(req *pb.ListAuditEventsRequest) string {
	raw, _ := json.Marshal([]any{req.GetSessionIds(), req.GetAgentIds(), req.GetKinds(),
		req.GetStartTime().AsTime().UnixNano(), req.GetStartTime() != nil,
		req.GetEndTime().AsTime().UnixNano(), req.GetEndTime() != nil, req.GetAfterId()}) // cannot fail
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

func encodeAuditPageToken(after uint64, filters string) string {
	raw, _ := json.Marshal(auditPageToken{Kind: auditPageTokenKind, After: after, Filters: filters}) // cannot fail
	return base64.RawURLEncoding.EncodeToString(raw)
}

// decodeAuditPageToken returns the entry id a page continues after; filters is the
// request's fingerprint, which must be the token's.
func decodeAuditPageToken(token, filters string) (uint64, error) {
	var t auditPageToken
	if !decodeToken(token, &t) || t.Kind != auditPageTokenKind || t.After == 0 {
		return 0, invalidArgument("page_token %q is not one ListAuditEvents issued; pass next_page_token from the previous response unchanged, or leave it empty for the first page", token)
	}
	if t.Filters != filters {
		return 0, invalidArgument("page_token was issued for other filters (session_ids, agent_ids, kinds, start_time, end_time, after_id); keep the filters while paging, or start again without page_token")
	}
	return t.After, nil
}
