package service

import (
	"cmp"
	"context"
	"slices"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/store"
)

// ShareSession replaces a session's ACL. The interceptors have checked that the caller
// owns the session or is an admin.
func (s *Service) ShareSession(ctx context.Context, req *pb.ShareSessionRequest) (*pb.ShareSessionResponse, error) {
	const method = "ShareSession"
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	grants, err := aclFromPB("acl", req.GetAcl())
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	if err := s.registry.store.SetSessionGrants(ctx, id, grants); err != nil {
		return nil, s.fail(ctx, method, sessionNotFound(id, err), "session_id", id)
	}
	s.logger.InfoContext(ctx, "session shared", "session_id", id, "principal", callerOf(ctx).Name, "grants", len(grants))
	resp, err := s.GetSession(ctx, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		return nil, err
	}
	return &pb.ShareSessionResponse{Session: resp.GetSession()}, nil
}

// reach is the registry as the judge of sessions' reach; nil without one.
func (s *Service) reach() sessionReach {
	if s.registry == nil {
		return nil
	}
	return s.registry
}

// withRecordedOwnership completes a session just recorded (Registry.recordSession) with
// its owner and ACL: the caller and the grants it gave when the record is new, without
// reading them back, else as the store has them.
func (s *Service) withRecordedOwnership(ctx context.Context, info *pb.SessionInfo, isNew bool, grants []store.SessionGrant) {
	if !isNew {
		s.withOwnership(ctx, info)
		return
	}
	info.Owner = cmp.Or(callerOf(ctx).Name, store.OwnerPrincipal)
	sorted := slices.Clone(grants)
	store.SortGrants(sorted)
	info.Acl = aclToPB(sorted)
}

// withOwnership completes sessions with their owners and ACLs from the store. A store
// that fails leaves them out, logged: the sessions are still worth showing.
func (s *Service) withOwnership(ctx context.Context, infos ...*pb.SessionInfo) {
	ids := make([]string, 0, len(infos))
	for _, info := range infos {
		ids = append(ids, info.GetSessionId())
	}
	creators, err := s.registry.store.SessionCreators(ctx, ids)
	if err != nil {
		s.logger.WarnContext(ctx, "could not read sessions' owners", "err", err)
		return
	}
	grants, err := s.registry.store.SessionGrants(ctx, ids)
	if err != nil {
		s.logger.WarnContext(ctx, "could not read sessions' ACLs", "err", err)
		return
	}
	for _, info := range infos {
		info.Owner = creators[info.GetSessionId()]
		info.Acl = aclToPB(grants[info.GetSessionId()])
	}
}
