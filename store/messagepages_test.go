package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// A query picks its range from either end, bounded on both sides, or one message, and
// always reads it oldest first.
func TestMessagesRanges(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "a")
		mustCreate(t, s, "c2", "a")
		var msgs []presenters.Message
		for i := range 10 {
			msgs = append(msgs, presenters.Message{ID: fmt.Sprintf("m%d", i), SessionID: "c1", Role: presenters.RoleUser,
				Status: presenters.MessageComplete, Blocks: []presenters.Block{{Type: presenters.BlockText, Text: strconv.Itoa(i)}}})
		}
		msgs = append(msgs, presenters.Message{ID: "other", SessionID: "c2", Role: presenters.RoleUser, Status: presenters.MessageComplete})
		if err := s.SaveMessages(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			q    presenters.MessageQuery
			want string
		}{
			{presenters.MessageQuery{FromOldest: true, Limit: 3}, "m0,m1,m2"},
			{presenters.MessageQuery{FromOldest: true, Limit: 3, AfterMessageID: "m2"}, "m3,m4,m5"},
			{presenters.MessageQuery{FromOldest: true, AfterMessageID: "m7"}, "m8,m9"},
			{presenters.MessageQuery{FromOldest: true, AfterMessageID: "m9"}, ""},
			{presenters.MessageQuery{AfterMessageID: "m2", Limit: 2}, "m8,m9"},
			{presenters.MessageQuery{AfterMessageID: "m2", BeforeMessageID: "m6"}, "m3,m4,m5"},
			{presenters.MessageQuery{FromOldest: true, AfterMessageID: "m2", BeforeMessageID: "m6", Limit: 2}, "m3,m4"},
			{presenters.MessageQuery{MessageID: "m4"}, "m4"},
			{presenters.MessageQuery{MessageID: "other"}, ""}, // another session's
			{presenters.MessageQuery{MessageID: "nope"}, ""},
		} {
			got, err := s.Messages(ctx, "c1", c.q)
			if err != nil {
				t.Fatalf("%+v: %v", c.q, err)
			}
			var ids []string
			for _, m := range got {
				ids = append(ids, m.ID)
				if len(m.Blocks) != 1 || "m"+m.Blocks[0].Text != m.ID {
					t.Errorf("message %s has blocks %+v", m.ID, m.Blocks)
				}
			}
			if strings.Join(ids, ",") != c.want {
				t.Errorf("%+v = %s, want %s", c.q, strings.Join(ids, ","), c.want)
			}
		}
		// A bound the session does not hold, even one of another session, is not found.
		for _, q := range []presenters.MessageQuery{{AfterMessageID: "zz"}, {FromOldest: true, AfterMessageID: "other"}, {BeforeMessageID: "other"}} {
			if _, err := s.Messages(ctx, "c1", q); !errors.Is(err, presenters.ErrNotFound) {
				t.Errorf("%+v: %v, want ErrNotFound", q, err)
			}
		}
	})
}
