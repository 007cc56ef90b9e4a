package store

import (
	"context"
	"reflect"
	"testing"
)

// A session's ACL reads back sorted by grantee, with its access, whether one session's
// is read (a call's reach) or several at once (a list); a session without one has none.
func TestSessionGrantsReadBack(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		for _, id := range []string{"s1", "s2"} {
			if err := s.AddSessionOwner(ctx, SessionOwner{SessionID: id, AgentID: "acp.a", Workspace: "/w", Creator: "alice"}); err != nil {
				t.Fatal(err)
			}
		}
		// Zed and zed: byte order, which a database's collation need not follow.
		given := []SessionGrant{{Grantee: GranteePrincipal("zed"), Write: true}, {Grantee: GranteeGroup("devs")}, {Grantee: GranteePrincipal("bob")}, {Grantee: GranteePrincipal("Zed")}}
		if err := s.SetSessionGrants(ctx, "s1", given); err != nil {
			t.Fatal(err)
		}
		want := []SessionGrant{
			{SessionID: "s1", Grantee: GranteeGroup("devs")},
			{SessionID: "s1", Grantee: GranteePrincipal("Zed")},
			{SessionID: "s1", Grantee: GranteePrincipal("bob")},
			{SessionID: "s1", Grantee: GranteePrincipal("zed"), Write: true},
		}
		for _, ids := range [][]string{{"s1"}, {"s1", "s2"}} {
			got, err := s.SessionGrants(ctx, ids)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got["s1"], want) || len(got["s2"]) != 0 {
				t.Errorf("ACLs of %v: %+v; want s1's %+v and none for s2", ids, got, want)
			}
		}
		if got, err := s.SessionGrants(ctx, []string{"s2"}); err != nil || len(got["s2"]) != 0 {
			t.Errorf("ACL of a session without one: %+v, %v", got, err)
		}
	})
}
