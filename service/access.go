package service

import (
	"context"
	"fmt"
	"slices"
	"strings"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// methodScopes are the scopes the service's methods need. A method of the service that
// is missing here needs admin (fail closed); other services (reflection) need
// credentials alone.
var methodScopes = map[string]Scopes{
	pb.AgenticService_GetServerInfo_FullMethodName:      ScopeRead,
	pb.AgenticService_ListAgents_FullMethodName:         ScopeRead,
	pb.AgenticService_GetAgent_FullMethodName:           ScopeRead,
	pb.AgenticService_GetSession_FullMethodName:         ScopeRead,
	pb.AgenticService_ListSessions_FullMethodName:       ScopeRead,
	pb.AgenticService_ListMessages_FullMethodName:       ScopeRead,
	pb.AgenticService_GetMessage_FullMethodName:         ScopeRead,
	pb.AgenticService_WaitMessage_FullMethodName:        ScopeRead,
	pb.AgenticService_Subscribe_FullMethodName:          ScopeRead,
	pb.AgenticService_ListAuditEvents_FullMethodName:    ScopeRead,
	pb.AgenticService_CreateWebLogin_FullMethodName:     0, // signs a browser in as the caller
	pb.AgenticService_CreateSession_FullMethodName:      ScopeWrite,
	pb.AgenticService_LoadSession_FullMethodName:        ScopeWrite,
	pb.AgenticService_CloseSession_FullMethodName:       ScopeWrite,
	pb.AgenticService_DeleteSession_FullMethodName:      ScopeWrite,
	pb.AgenticService_SendMessage_FullMethodName:        ScopeWrite,
	pb.AgenticService_CancelMessage_FullMethodName:      ScopeWrite,
	pb.AgenticService_SetModel_FullMethodName:           ScopeWrite,
	pb.AgenticService_SetMode_FullMethodName:            ScopeWrite,
	pb.AgenticService_SetConfigOption_FullMethodName:    ScopeWrite,
	pb.AgenticService_ForkSession_FullMethodName:        ScopeWrite,
	pb.AgenticService_RespondPermission_FullMethodName:  ScopeWrite,
	pb.AgenticService_RespondElicitation_FullMethodName: ScopeWrite,
	pb.AgenticService_ShareSession_FullMethodName:       ScopeWrite,
	pb.AgenticService_LogoutAgent_FullMethodName:        ScopeAdmin,
}

// methodScope is the scope a method needs (methodScopes).
func methodScope(fullMethod string) Scopes {
	if s, ok := methodScopes[fullMethod]; ok {
		return s
	}
	if strings.HasPrefix(fullMethod, "/"+pb.AgenticService_ServiceDesc.ServiceName+"/") {
		return ScopeAdmin
	}
	return 0
}

// access is how far a principal reaches one session.
type access int

const (
	accessNone  access = iota
	accessRead         // shared for reading
	accessWrite        // shared for writing
	accessOwner        // its creator, or an admin: may also share and delete it
)

// sessionNeeds is the reach the session-scoped methods need to the session they name.
var sessionNeeds = map[string]access{
	pb.AgenticService_GetSession_FullMethodName:         accessRead,
	pb.AgenticService_ListMessages_FullMethodName:       accessRead,
	pb.AgenticService_GetMessage_FullMethodName:         accessRead,
	pb.AgenticService_WaitMessage_FullMethodName:        accessRead,
	pb.AgenticService_LoadSession_FullMethodName:        accessWrite,
	pb.AgenticService_CloseSession_FullMethodName:       accessWrite,
	pb.AgenticService_SendMessage_FullMethodName:        accessWrite,
	pb.AgenticService_CancelMessage_FullMethodName:      accessWrite,
	pb.AgenticService_SetModel_FullMethodName:           accessWrite,
	pb.AgenticService_SetMode_FullMethodName:            accessWrite,
	pb.AgenticService_SetConfigOption_FullMethodName:    accessWrite,
	pb.AgenticService_ForkSession_FullMethodName:        accessWrite,
	pb.AgenticService_RespondPermission_FullMethodName:  accessWrite,
	pb.AgenticService_RespondElicitation_FullMethodName: accessWrite,
	pb.AgenticService_DeleteSession_FullMethodName:      accessOwner,
	pb.AgenticService_ShareSession_FullMethodName:       accessOwner,
}

// sessionReach tells how far a principal reaches a session; *Registry is one.
type sessionReach interface {
	reach(ctx context.Context, p Principal, sessionID string) (access, error)
}

// checkReach refuses a call that needs more of a session than the caller reaches. A
// session the caller may not read at all is NOT_FOUND, worded as for an unknown id:
// session ids, workspaces and titles are private to those a session is shared with, and
// a distinct answer would confirm a guessed or leaked id. A session it reads but may not
// change as the call would is PERMISSION_DENIED naming the missing access: its existence
// is no secret from it.
func checkReach(ctx context.Context, sessions sessionReach, sessionID string, need access, method string) error {
	p := callerOf(ctx)
	got, err := sessions.reach(ctx, p, sessionID)
	if err != nil {
		return sessionNotFound(sessionID, err)
	}
	switch {
	case got >= need:
		return nil
	case got == accessNone:
		return sessionNotFound(sessionID, unknownSession(sessionID))
	case need == accessOwner:
		return withReason(pb.ErrorReason_ERROR_REASON_SCOPE_MISSING,
			fmt.Errorf("%w: only session %s's owner or an admin may %s it", errForbidden, sessionID, strings.ToLower(strings.TrimSuffix(method, "Session"))),
			"scope", ScopeAdmin.String(), "principal", p.Name, "session_id", sessionID)
	default:
		return sessionScopeMissing(p, sessionID, ScopeWrite, method)
	}
}

// unknownSession is the store's error for an unknown session, word for word.
func unknownSession(sessionID string) error {
	return fmt.Errorf("%w: unknown session %q; ListSessions shows the sessions this server knows", presenters.ErrNotFound, sessionID)
}

// reach is how far p reaches a session: an admin every session, its creator its own,
// others as its ACL grants to them or one of their groups.
func (r *Registry) reach(ctx context.Context, p Principal, sessionID string) (access, error) {
	if p.admin() {
		return accessOwner, nil
	}
	rec, err := r.store.SessionOwner(ctx, sessionID)
	if err != nil {
		return accessNone, err
	}
	if rec.Creator == p.Name {
		return accessOwner, nil
	}
	grants, err := r.store.SessionGrants(ctx, []string{sessionID})
	if err != nil {
		return accessNone, err
	}
	return grantedTo(p, grants[sessionID]), nil
}

// grantedTo is what an ACL grants p.
func grantedTo(p Principal, grants []store.SessionGrant) access {
	got := accessNone
	for _, g := range grants {
		if g.Grantee != store.GranteePrincipal(p.Name) && !slices.ContainsFunc(p.Groups, func(group string) bool { return g.Grantee == store.GranteeGroup(group) }) {
			continue
		}
		if g.Write {
			return accessWrite
		}
		got = accessRead
	}
	return got
}

// aclFromPB reads an ACL from a request.
func aclFromPB(field string, acl []*pb.SessionGrant) ([]store.SessionGrant, error) {
	out := make([]store.SessionGrant, 0, len(acl))
	seen := map[string]bool{}
	for i, g := range acl {
		var grantee string
		switch {
		case g.GetPrincipal() != "":
			grantee = store.GranteePrincipal(g.GetPrincipal())
		case g.GetGroup() != "":
			grantee = store.GranteeGroup(g.GetGroup())
		default:
			return nil, invalidField(fmt.Sprintf("%s[%d]", field, i), "%s[%d] names no principal and no group: set principal or group", field, i)
		}
		if seen[grantee] {
			return nil, invalidField(fmt.Sprintf("%s[%d]", field, i), "%s[%d] names %s a second time: give each principal or group one entry", field, i, grantee)
		}
		seen[grantee] = true
		switch g.GetAccess() {
		case pb.SessionAccess_SESSION_ACCESS_READ, pb.SessionAccess_SESSION_ACCESS_WRITE:
		default:
			return nil, invalidField(fmt.Sprintf("%s[%d].access", field, i), "%s[%d].access is %v: use SESSION_ACCESS_READ or SESSION_ACCESS_WRITE", field, i, g.GetAccess())
		}
		out = append(out, store.SessionGrant{Grantee: grantee, Write: g.GetAccess() == pb.SessionAccess_SESSION_ACCESS_WRITE})
	}
	return out, nil
}

// aclToPB is an ACL on the wire.
func aclToPB(grants []store.SessionGrant) []*pb.SessionGrant {
	var out []*pb.SessionGrant
	for _, g := range grants {
		e := &pb.SessionGrant{Access: pb.SessionAccess_SESSION_ACCESS_READ}
		if g.Write {
			e.Access = pb.SessionAccess_SESSION_ACCESS_WRITE
		}
		if name, ok := strings.CutPrefix(g.Grantee, "group:"); ok {
			e.Grantee = &pb.SessionGrant_Group{Group: name}
		} else {
			e.Grantee = &pb.SessionGrant_Principal{Principal: strings.TrimPrefix(g.Grantee, "principal:")}
		}
		out = append(out, e)
	}
	return out
}
