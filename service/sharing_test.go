package service

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// CreateSession answers with the owner and ACL it recorded without reading them back:
// they must be what the store then has, in the store's order, for the owner token and
// for a named principal.
func TestCreateSessionAnswersTheStoredOwnership(t *testing.T) {
	e := principalsEnv(t)
	acl := []*pb.SessionGrant{
		{Grantee: &pb.SessionGrant_Principal{Principal: "zed"}, Access: pb.SessionAccess_SESSION_ACCESS_WRITE},
		{Grantee: &pb.SessionGrant_Group{Group: "devs"}, Access: pb.SessionAccess_SESSION_ACCESS_READ},
		{Grantee: &pb.SessionGrant_Principal{Principal: "bob"}, Access: pb.SessionAccess_SESSION_ACCESS_READ},
	}
	for _, c := range []struct {
		name, token, owner string
		acl                []*pb.SessionGrant
	}{
		{"owner token, no ACL", testToken, "owner", nil},
		{"alice with an ACL", aliceToken, "alice", acl},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := dialListener(t, e.lis, c.token)
			t.Cleanup(func() { conn.Close() })
			client := pb.NewAgenticServiceClient(conn)
			created, err := client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}, Acl: c.acl})
			if err != nil {
				t.Fatal(err)
			}
			got, err := client.GetSession(bg, &pb.GetSessionRequest{SessionId: created.GetSession().GetSessionId()})
			if err != nil {
				t.Fatal(err)
			}
			if created.GetSession().GetOwner() != c.owner || got.GetSession().GetOwner() != c.owner {
				t.Fatalf("owner %q answered, %q stored; want %q", created.GetSession().GetOwner(), got.GetSession().GetOwner(), c.owner)
			}
			answered := &pb.SessionInfo{Acl: created.GetSession().GetAcl()}
			stored := &pb.SessionInfo{Acl: got.GetSession().GetAcl()}
			if !proto.Equal(answered, stored) || len(stored.GetAcl()) != len(c.acl) {
				t.Fatalf("ACL answered %v, stored %v; want the %d grants given", answered.GetAcl(), stored.GetAcl(), len(c.acl))
			}
		})
	}
}
