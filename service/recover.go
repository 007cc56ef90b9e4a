package service

import (
	"context"
	"log/slog"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// Interruption says what cut replies short, for the ERROR that ends each.
type Interruption int

const (
	// InterruptServerRestarted: this agenticd stopped while the replies ran (a crash,
	// kill -9, or a shutdown that did not wait); found at its next start.
	InterruptServerRestarted Interruption = iota
	// InterruptOwnerLost: the replica that ran them stopped; found by the one taking
	// their session over.
	InterruptOwnerLost
)

// EndInterruptedReplies ends, for every subscriber, each reply MarkInterrupted (or
// MarkSessionInterrupted) returned: an ERROR saying why, then its MESSAGE_END with stop
// reason interrupted, so that nobody waits for the end of a turn nothing runs any more.
// Call it after RecoverInterruptedReplies, before the sessions serve again; the events
// reach the log with the next batch (Hub.WaitLogged waits for it).
func EndInterruptedReplies(hub *Hub, interrupted []store.InterruptedMessage, why Interruption) {
	code, message := "server_restarted", "agenticd stopped while this reply ran; the reply is kept as incomplete with what was sent"
	if why == InterruptOwnerLost {
		code, message = "owner_lost", "the replica that ran this reply stopped; the reply is kept as incomplete with what was sent"
	}
	for _, m := range interrupted {
		hub.Publish(presenters.Event{SessionID: m.SessionID, AgentID: m.AgentID, Payload: presenters.ErrorPayload{
			Code: code, MessageID: m.MessageID, Retryable: true, Message: message}})
		hub.Publish(presenters.Event{SessionID: m.SessionID, AgentID: m.AgentID, Payload: presenters.MessageEndPayload{
			MessageID: m.MessageID, StopReason: presenters.StopInterrupted, Role: presenters.RoleAssistant}})
	}
}

// RecoverInterruptedReplies gives each reply a crash cut short the text its subscribers
// were sent. Presenters store a reply in progress only now and then (checkpoints), while
// the event log holds every event a subscriber got, so after a kill the stored text lags
// the log: each interrupted message's text becomes the assistant text of its logged
// MESSAGE_DELTA events, joined, when that extends what is stored (store.ExtendMessageText).
// The messages stay incomplete. Call it at start-up, after store.MarkInterrupted and before
// any turn runs, with the messages MarkInterrupted returned.
//
// A message whose logged text does not begin with the stored text (the log was pruned past
// its start) keeps its stored text; so does one whose events cannot be read, with a
// warning: start-up goes on either way. Only a cancelled ctx stops it, returning its error.
func RecoverInterruptedReplies(ctx context.Context, st *store.Store, interrupted []store.InterruptedMessage, log *slog.Logger) error {
	var rebuilt, added int
	for _, m := range interrupted {
		if err := ctx.Err(); err != nil {
			return err
		}
		mlog := log.With("session_id", m.SessionID, "message_id", m.MessageID)
		logged, err := st.MessageEvents(ctx, m.SessionID, m.MessageID)
		if err != nil {
			mlog.Warn("could not read an interrupted reply's events from the event log; it keeps the text last stored", "err", err)
			continue
		}
		text, ok := loggedReplyText(logged, mlog)
		if !ok || text == "" {
			continue
		}
		n, err := st.ExtendMessageText(ctx, m.SessionID, m.MessageID, text)
		if err != nil {
			mlog.Warn("could not store an interrupted reply's text from the event log; it keeps the text last stored", "err", err)
			continue
		}
		if n > 0 {
			rebuilt++
			added += n
			mlog.Debug("interrupted reply's text rebuilt from the event log", "bytes_added", n)
		}
	}
	if rebuilt > 0 {
		log.Info("rebuilt interrupted replies from the event log: they hold what subscribers were sent", "messages", rebuilt, "bytes_added", added)
	}
	return nil
}

// loggedReplyText joins the assistant text of one message's logged MESSAGE_DELTA events,
// in order (text belongs to a message and a role). Replayed events are history shown
// again, not part of the reply. ok is false when an event does not decode: a text with a
// hole in it must not be stored.
func loggedReplyText(logged []store.LoggedEvent, log *slog.Logger) (text string, ok bool) {
	var b strings.Builder
	var ev pb.AgenticEvent
	for _, le := range logged {
		ev.Reset()
		if err := proto.Unmarshal(le.Data, &ev); err != nil {
			log.Warn("an interrupted reply's logged event does not decode; the reply keeps the text last stored",
				"sequence", le.Sequence, "err", err)
			return "", false
		}
		d := ev.GetMessageDelta()
		if d == nil || ev.GetReplay() || d.GetRole() != pb.MessageRole_MESSAGE_ROLE_ASSISTANT {
			continue
		}
		b.WriteString(d.GetText())
	}
	return b.String(), true
}

// matchLoggedReplies makes each reply a take-over ended hold exactly the text the event
// log holds of it, which is what its subscribers saw (on replicas they read the log
// alone): extended when its last owner's checkpoints lagged, cut when they ran ahead of
// appends that were fenced out or never made. A reply whose logged text does not begin
// it (pruned) keeps what is stored, as in RecoverInterruptedReplies.
func matchLoggedReplies(ctx context.Context, st *store.Store, replies []store.InterruptedMessage, log *slog.Logger) error {
	for _, m := range replies {
		if err := ctx.Err(); err != nil {
			return err
		}
		mlog := log.With("session_id", m.SessionID, "message_id", m.MessageID)
		logged, err := st.MessageEvents(ctx, m.SessionID, m.MessageID)
		if err != nil {
			return err
		}
		text, ok := loggedReplyText(logged, mlog)
		if !ok {
			continue
		}
		added, err := st.ExtendMessageText(ctx, m.SessionID, m.MessageID, text)
		if err != nil {
			return err
		}
		cut := 0
		if added == 0 {
			if cut, err = st.CutMessageText(ctx, m.SessionID, m.MessageID, text); err != nil {
				return err
			}
		}
		if added > 0 || cut > 0 {
			mlog.Info("a reply taken over now holds what its subscribers saw", "bytes_added", added, "bytes_cut", cut)
		}
	}
	return nil
}
