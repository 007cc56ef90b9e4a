package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"

	"github.com/agenticd/agenticd/events"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
	"github.com/agenticd/agenticd/store"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A batch frame holds what already waits for the subscriber, up to these bounds: far
// under the 4 MiB a client accepts by default (one event alone may come near it), and
// small enough that a frame does not hold the next ones up for long.
const (
	maxBatchEvents = 4096
	maxBatchBytes  = 256 << 10
)

// A merged delta is no larger than the batch it came in, which keeps it under
// wire.MaxEventBytes: this fails to compile should maxBatchBytes ever pass it.
const _ = uint(wire.MaxEventBytes - maxBatchBytes)

// Subscribe replays the held events after the start point, then streams live ones, until
// the client leaves, the server stops, or the client falls a whole queue behind. Events
// travel in batches of what already waits (never held back to fill one); a caught_up
// frame marks the end of the replay, bookmarks keep a filtered subscriber's resume point
// inside the ring, and heartbeats fill silences.
func (s *Service) Subscribe(req *pb.SubscribeRequest, stream pb.AgenticService_SubscribeServer) error {
	const method = "Subscribe"
	ctx := stream.Context()
	filter, start, err := subscription(req)
	if err != nil {
		return s.fail(ctx, method, err)
	}
	if err := s.checkSubscriptionTargets(ctx, req.GetSessionIds(), req.GetAgentIds()); err != nil {
		return s.fail(ctx, method, err)
	}
	sub, err := s.hub.subscribe(filter, start)
	if err != nil {
		return s.fail(ctx, method, err)
	}
	defer sub.Close()
	// Headers go out only now, so a client that waits for them knows it is registered:
	// every event published from here on reaches it.
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return s.fail(ctx, method, cmp.Or(ctx.Err(), err))
	}
	interval := s.hub.HeartbeatInterval()
	silence := time.NewTimer(interval)
	defer silence.Stop()
	send := func(frame any) error {
		if err := stream.SendMsg(frame); err != nil {
			return s.fail(ctx, method, cmp.Or(ctx.Err(), err))
		}
		silence.Reset(interval)
		return nil
	}
	var taken []*wire.Event // reused: a frame copies the events' bytes, not this slice
	frames := wire.Frames{Merge: !req.GetUnmergedDeltas()}
	visible := visibilityFor(callerOf(ctx), s.reach())
	caughtUp := false
	for {
		if !caughtUp {
			if seq, ok := sub.CaughtUp(); ok {
				caughtUp = true
				if err := send(&pb.SubscribeResponse{Frame: &pb.SubscribeResponse_CaughtUp{CaughtUp: &pb.CaughtUp{Sequence: seq}}}); err != nil {
					return err
				}
			}
		}
		// The replay first, then live events; each one's wire bytes are shared by every
		// stream that sends it.
		batch, err := sub.NextBatch(ctx, silence.C, maxBatchEvents, maxBatchBytes, taken)
		if err != nil {
			return s.fail(ctx, method, endError(err, sub.Last()), "last_sequence", sub.Last())
		}
		taken = batch.Events
		shown := batch.Events
		if visible != nil {
			var hidden uint64
			if shown, hidden = visible.keep(ctx, shown); len(shown) == 0 && hidden > batch.Bookmark {
				// The resume point moves past what the caller may not see.
				batch.Bookmark = hidden
			}
		}
		if len(shown) > 0 {
			if err := send(frames.Frame(shown)); err != nil {
				return err
			}
		}
		clear(taken) // the frame has their bytes; this slice need not keep them alive
		if batch.Bookmark > 0 {
			if err := send(&pb.SubscribeResponse{Frame: &pb.SubscribeResponse_Bookmark{Bookmark: &pb.Bookmark{Sequence: batch.Bookmark}}}); err != nil {
				return err
			}
		}
		if len(batch.Events) == 0 && batch.Bookmark == 0 && !batch.ReplayEnded { // the silence timer fired
			if s.hub.cutOff.Load() {
				return s.fail(ctx, method, &cutOffError{Last: sub.Last(), err: store.ErrUnavailable}, "last_sequence", sub.Last())
			}
			// The resume point rides along, so a filtered stream that sees nothing for long
			// still holds a point inside the ring.
			hb := &pb.Heartbeat{ServerTime: timestamppb.Now(), Sequence: sub.Settled()}
			if err := send(&pb.SubscribeResponse{Frame: &pb.SubscribeResponse_Heartbeat{Heartbeat: hb}}); err != nil {
				return err
			}
		}
	}
}

// subscription reads a request's filters and start point.
func subscription(req *pb.SubscribeRequest) (events.Filter, events.Start, error) {
	for i, id := range req.GetSessionIds() {
		if id == "" {
			return events.Filter{}, events.Start{}, invalidArgument("session_ids[%d] is empty: list session ids, or leave session_ids empty for all sessions", i)
		}
	}
	for i, id := range req.GetAgentIds() {
		if id == "" {
			return events.Filter{}, events.Start{}, invalidArgument("agent_ids[%d] is empty: list agent ids, or leave agent_ids empty for all agents", i)
		}
	}
	f := events.Filter{SessionIDs: req.GetSessionIds(), AgentIDs: req.GetAgentIds()}
	if len(req.GetTypes()) > 0 {
		wanted := make(map[pb.AgenticEventType]bool, len(req.GetTypes()))
		for i, t := range req.GetTypes() {
			if t == pb.AgenticEventType_AGENTIC_EVENT_TYPE_UNSPECIFIED {
				return events.Filter{}, events.Start{}, invalidArgument("types[%d] is AGENTIC_EVENT_TYPE_UNSPECIFIED: list the event types to receive, or leave types empty for all", i)
			}
			if _, known := pb.AgenticEventType_name[int32(t)]; !known {
				return events.Filter{}, events.Start{}, invalidArgument("types[%d] is %d, not an AgenticEventType this server knows: list the event types to receive, or leave types empty for all", i, t)
			}
			wanted[t] = true
		}
		for pt, t := range wire.EventTypes() {
			if wanted[t] {
				f.Types = append(f.Types, pt)
			}
		}
		if len(f.Types) == 0 {
			// Known to the API but never published here: the stream gets no event, as asked.
			f.Types = []presenters.EventType{noEventType}
		}
	}
	start := events.Live()
	switch st := req.GetStart().(type) {
	case *pb.SubscribeRequest_AfterSequence:
		start = events.After(st.AfterSequence)
	case *pb.SubscribeRequest_OldestHeld:
		if st.OldestHeld {
			start = events.OldestHeld()
		}
	}
	return f, start, nil
}

// noEventType is a type no event has, for a types filter that matches none.
const noEventType presenters.EventType = -1

// checkSubscriptionTargets checks that every session and agent a subscription names
// exists, since a stream filtered on a name that does not would wait forever: a session
// the store knows (loaded or not) or the hub has events of (one being created), a
// registered agent.
func (s *Service) checkSubscriptionTargets(ctx context.Context, sessionIDs, agentIDs []string) error {
	for i, id := range agentIDs {
		if _, err := s.registry.Agent(id); err != nil {
			return fmt.Errorf("agent_ids[%d]: %w", i, err)
		}
	}
	var notHeld []string // the sessions without events in the hub, for the store to know
	for _, id := range sessionIDs {
		if s.hub.agentOf(id) == "" {
			notHeld = append(notHeld, id)
		}
	}
	if p := callerOf(ctx); !p.admin() {
		for i, id := range sessionIDs {
			if got, err := s.registry.reach(ctx, p, id); err == nil && got == accessNone {
				return sessionNotFound(id, fmt.Errorf("session_ids[%d]: %w", i, unknownSession(id)))
			}
		}
	}
	if len(notHeld) == 0 {
		return nil
	}
	stored, err := s.registry.store.KnownSessions(ctx, notHeld)
	if err != nil {
		return err
	}
	// The hub is asked again: a session created while the store was read has events now.
	for i, id := range sessionIDs {
		if !stored[id] && s.hub.agentOf(id) == "" {
			return sessionNotFound(id, fmt.Errorf("session_ids[%d]: %w: unknown session %q; ListSessions shows the sessions this server knows",
				i, presenters.ErrNotFound, id))
		}
	}
	return nil
}

// endError is why a subscription ended, with the client's resume point when the hub
// ended it.
func endError(err error, last uint64) error {
	if store.IsUnavailable(err) || errors.Is(err, events.ErrLogUnavailable) {
		return &cutOffError{Last: last, err: err} // the log is away: resume after last
	}
	var overflow *events.OverflowError
	var closed *events.ClosedError
	var outOfRange *events.OutOfRangeError
	switch {
	case errors.As(err, &overflow):
		return &overflowError{Queue: overflow.Queue, Last: overflow.Last}
	case errors.As(err, &closed):
		return &shutdownError{Last: closed.Last}
	case errors.As(err, &outOfRange):
		// The event log's retention overtook a long replay.
		return fmt.Errorf("%w; %s", err, rebuildHint)
	}
	return err
}
