package service

import (
	"context"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/service/wire"
)

// How long a stream trusts what it learnt of a session's reach: a ShareSession (on any
// replica) shows in running streams within this time. Bounded per stream.
const (
	visibilityTTL        = 2 * time.Second
	maxVisibilityEntries = 4096
)

// streamVisibility keeps out of a stream the events of sessions its principal may not
// read. Agent events (no session) are everyone's, as ListAgents is.
type streamVisibility struct {
	p        Principal
	sessions sessionReach
	now      func() time.Time
	known    map[string]visibleUntil
}

type visibleUntil struct {
	ok    bool
	until time.Time
}

// visibilityFor is nil for a principal that reads every session.
func visibilityFor(p Principal, sessions sessionReach) *streamVisibility {
	if p.admin() || sessions == nil {
		return nil
	}
	return &streamVisibility{p: p, sessions: sessions, now: time.Now, known: map[string]visibleUntil{}}
}

// keep compacts evs to the events the principal may read (in place) and returns them,
// with the sequence of the last event left out (0 when none was).
func (v *streamVisibility) keep(ctx context.Context, evs []*wire.Event) (kept []*wire.Event, lastDropped uint64) {
	kept = evs[:0]
	for _, ev := range evs {
		seq, sessionID := eventHead(ev.Bytes())
		if sessionID == "" {
			kept = append(kept, ev)
			continue
		}
		if ok, unknown := v.readable(ctx, sessionID); ok || unknown && v.createdByReader(ev.Bytes()) {
			kept = append(kept, ev)
			continue
		}
		lastDropped = seq
	}
	return kept, lastDropped
}

// readable reports whether the principal may read the session; unknown when the store
// could not say (a session not recorded yet, or a store that failed).
func (v *streamVisibility) readable(ctx context.Context, sessionID string) (ok, unknown bool) {
	now := v.now()
	if k, ok := v.known[sessionID]; ok && now.Before(k.until) {
		return k.ok, false
	}
	got, err := v.sessions.reach(ctx, v.p, sessionID)
	if err != nil {
		// Not remembered: a session whose CreateSession has not recorded it yet is asked
		// about again at its next event, and so is one the store failed to answer for.
		return false, true
	}
	if len(v.known) >= maxVisibilityEntries {
		for id, k := range v.known {
			if !now.Before(k.until) {
				delete(v.known, id)
			}
		}
		if len(v.known) >= maxVisibilityEntries {
			clear(v.known)
		}
	}
	v.known[sessionID] = visibleUntil{ok: got >= accessRead, until: now.Add(visibilityTTL)}
	return got >= accessRead, false
}

// createdByReader reports whether an event is the SESSION_CREATED of a session the
// principal created: it comes before CreateSession records the session's owner, and its
// creator's stream should not miss it. Decoded only for sessions the store does not know.
func (v *streamVisibility) createdByReader(b []byte) bool {
	var ev pb.AgenticEvent
	if err := proto.Unmarshal(b, &ev); err != nil {
		return false
	}
	return ev.GetSessionCreated().GetSession().GetOwner() == v.p.Name && v.p.Name != ""
}

// eventHead reads an encoded AgenticEvent's sequence (field 1) and session id (field 2)
// without decoding the rest.
func eventHead(b []byte) (seq uint64, sessionID string) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return seq, sessionID
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return seq, sessionID
			}
			seq, n = v, m
		case num == 2 && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return seq, sessionID
			}
			sessionID, n = string(v), m
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return seq, sessionID
			}
		}
		b = b[n:]
	}
	return seq, sessionID
}
