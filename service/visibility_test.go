package service

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
)

// unrecorded is a store that knows no session yet, as before CreateSession records one.
type unrecorded struct{}

func (unrecorded) reach(context.Context, Principal, string) (access, error) {
	return accessNone, presenters.ErrNotFound
}

// A session's SESSION_CREATED comes before its owner is recorded: a stream keeps it for
// the principal it names as owner, and for nobody else; other events of a session not
// recorded yet are held back.
func TestStreamKeepsTheCreatorsUnrecordedSession(t *testing.T) {
	encode := func(ev *pb.AgenticEvent) *wire.Event {
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return wire.NewEvent(b)
	}
	created := func(owner string) *wire.Event {
		return encode(&pb.AgenticEvent{Sequence: 1, SessionId: "s1", Payload: &pb.AgenticEvent_SessionCreated{
			SessionCreated: &pb.SessionCreated{Session: &pb.SessionInfo{SessionId: "s1", Owner: owner}}}})
	}
	status := encode(&pb.AgenticEvent{Sequence: 2, SessionId: "s1", Payload: &pb.AgenticEvent_StatusChanged{StatusChanged: &pb.StatusChanged{}}})
	for _, tc := range []struct {
		owner string
		kept  int
	}{{"alice", 1}, {"bob", 0}, {"", 0}} {
		v := visibilityFor(Principal{Name: "alice", Scopes: ScopeRead}, unrecorded{})
		kept, _ := v.keep(context.Background(), []*wire.Event{created(tc.owner), status})
		if len(kept) != tc.kept {
			t.Errorf("SESSION_CREATED owned by %q and a status change, for alice: %d kept; want %d", tc.owner, len(kept), tc.kept)
		}
	}
}
