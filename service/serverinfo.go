package service

import (
	"context"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/version"
	"github.com/agenticd/agenticd/service/wire"
)

// features are what this server does beyond the core API, as GetServerInfo names them;
// confinementFeature is added when the processes of sessions run confined.
var features = []string{
	"request_id",          // retries with a request_id get the first answer
	"event_batches",       // Subscribe sends EventBatch frames
	"merged_deltas",       // waiting deltas of one message go out as one (SubscribeRequest.unmerged_deltas)
	"bookmarks",           // filtered subscriptions get Bookmark frames
	"heartbeats",          // idle streams get Heartbeat frames
	"replay_marks",        // events a LoadSession replays are marked replay
	"agent_status_events", // AGENT_STATUS_CHANGED events
	"connect",             // Connect and gRPC-Web on the gRPC port, and the web page at /
	"delete_session",      // DeleteSession
	"audit",               // ListAuditEvents
}

const confinementFeature = "confinement"

// confinementReporter is what the workspace roots may tell about confinement
// (sandbox.Roots does).
type confinementReporter interface {
	// ConfinesFiles reports whether the processes of sessions run with their files
	// bounded.
	ConfinesFiles() bool
}

// rootLister is what the workspace roots may tell about themselves (sandbox.Roots does).
type rootLister interface {
	// Dirs returns the root directories, absolute and symlink-free.
	Dirs() []string
}

func (s *Service) GetServerInfo(ctx context.Context, _ *pb.GetServerInfoRequest) (*pb.GetServerInfoResponse, error) {
	caller := callerOf(ctx)
	count, err := s.registry.store.CountSessions(ctx, caller.reader())
	if err != nil {
		return nil, s.fail(ctx, "GetServerInfo", err)
	}
	oldest, newest := s.hub.HeldRange()
	resp := &pb.GetServerInfoResponse{
		Version:        version.String("agenticd"),
		Limits:         s.serverLimits(),
		OldestSequence: oldest,
		NewestSequence: newest,
		Features:       append([]string(nil), features...),
		Caller:         caller.toPB(),
		SessionCount:   count,
	}
	if d, ok := s.roots.(rootLister); ok {
		resp.WorkspaceRoots = d.Dirs()
	}
	if c, ok := s.roots.(confinementReporter); ok && c.ConfinesFiles() {
		resp.Features = append(resp.Features, confinementFeature)
	}
	return resp, nil
}

// serverLimits are the limits the handlers, the retry memory and the hub apply.
func (s *Service) serverLimits() *pb.ServerLimits {
	return &pb.ServerLimits{
		MaxEventBytes:     wire.MaxEventBytes,
		DefaultPageSize:   defaultPageSize,
		MaxPageSize:       maxPageSize,
		MaxResponseBytes:  maxResponseBytes,
		RequestIdTtl:      durationpb.New(requestIDTTL),
		HeartbeatInterval: durationpb.New(s.hub.HeartbeatInterval()),
		SubscriberQueue:   int32(s.hub.SubscriberQueue()),
	}
}
