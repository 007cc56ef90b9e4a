package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// maxResponseBytes is where a ListMessages or ListSessions page stops adding items. One
// stored message is cut to wire.MaxEventBytes (messageForResponse), so a page always has
// room for at least one, and never comes near the 4 MiB gRPC clients accept.
const maxResponseBytes = wire.MaxEventBytes

// messageReadChunk is how many messages ListMessages reads from the store at a time.
const messageReadChunk = 32

// ListMessages returns a page of a session's stored history in the order asked for, with
// a token for the next page when the page ended before the history did: after
// page_size messages, or before maxResponseBytes.
func (s *Service) ListMessages(ctx context.Context, req *pb.ListMessagesRequest) (*pb.ListMessagesResponse, error) {
	const method = "ListMessages"
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	order := req.GetOrder()
	switch order {
	case pb.MessageOrder_MESSAGE_ORDER_UNSPECIFIED:
		order = pb.MessageOrder_MESSAGE_ORDER_OLDEST_FIRST
	case pb.MessageOrder_MESSAGE_ORDER_OLDEST_FIRST, pb.MessageOrder_MESSAGE_ORDER_NEWEST_FIRST:
	default:
		return nil, s.fail(ctx, method, invalidField("order", "order %d is not a MessageOrder: use MESSAGE_ORDER_OLDEST_FIRST or MESSAGE_ORDER_NEWEST_FIRST", order), "session_id", id)
	}
	after, err := decodeMessagePageToken(req.GetPageToken(), id, order)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	resp := &pb.ListMessagesResponse{}
	total := 0
	more := false
	// Read a few messages at a time, so that a page of large messages stops reading once
	// its bytes are spent instead of holding page_size of them at once.
	for cursor := after; len(resp.Messages) < size; {
		want := min(messageReadChunk, size-len(resp.Messages))
		// One more than wanted, to know whether the history goes on.
		q := presenters.MessageQuery{Limit: want + 1}
		if order == pb.MessageOrder_MESSAGE_ORDER_OLDEST_FIRST {
			q.FromOldest, q.AfterMessageID = true, cursor
		} else {
			q.BeforeMessageID = cursor
		}
		msgs, attrs, err := s.readMessages(ctx, id, q)
		if errors.Is(err, presenters.ErrNotFound) && cursor == after && after != "" {
			// The session was found; the message the token continues after was not.
			err = invalidArgument("page_token continues after message %q, which session %q does not hold; start again without page_token", after, id)
		}
		if err != nil {
			return nil, s.fail(ctx, method, err, attrs...)
		}
		if order == pb.MessageOrder_MESSAGE_ORDER_NEWEST_FIRST {
			slices.Reverse(msgs)
		}
		more = len(msgs) > want
		msgs = msgs[:min(len(msgs), want)]
		full := false
		for _, m := range msgs {
			out, n := s.messageForResponse(ctx, m)
			n = protowire.SizeTag(1) + protowire.SizeBytes(n)
			if len(resp.Messages) > 0 && total+n > maxResponseBytes {
				more, full = true, true
				break
			}
			resp.Messages = append(resp.Messages, out)
			total += n
			cursor = m.ID
		}
		if full || !more {
			break
		}
	}
	if more {
		last := resp.Messages[len(resp.Messages)-1].GetMessageId()
		resp.NextPageToken = encodeMessagePageToken(id, order, last)
	}
	return resp, nil
}

// GetMessage returns one stored message.
func (s *Service) GetMessage(ctx context.Context, req *pb.GetMessageRequest) (*pb.GetMessageResponse, error) {
	const method = "GetMessage"
	id, messageID := req.GetSessionId(), req.GetMessageId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required("message_id", messageID, "the id of a message from ListMessages, SendMessage or an event"); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	m, attrs, err := s.readMessage(ctx, id, messageID)
	if err != nil {
		return nil, s.fail(ctx, method, err, append(attrs, "message_id", messageID)...)
	}
	out, _ := s.messageForResponse(ctx, m)
	return &pb.GetMessageResponse{Message: out}, nil
}

// readMessage reads one message of a session's history (readMessages); a
// *messageNotFoundError when the session holds none with that id.
func (s *Service) readMessage(ctx context.Context, sessionID, messageID string) (presenters.Message, []any, error) {
	msgs, attrs, err := s.readMessages(ctx, sessionID, presenters.MessageQuery{MessageID: messageID})
	if err == nil && len(msgs) == 0 {
		err = &messageNotFoundError{SessionID: sessionID, MessageID: messageID}
	}
	if err != nil {
		return presenters.Message{}, attrs, err
	}
	return msgs[0], attrs, nil
}

// messageNotFoundError: the session exists but holds no message with that id
// (MESSAGE_NOT_FOUND, metadata message_id).
type messageNotFoundError struct{ SessionID, MessageID string }

func (e *messageNotFoundError) Error() string {
	return fmt.Sprintf("session %q holds no message %q; ListMessages lists the session's messages with their ids (a message being produced is stored once its turn has started)",
		e.SessionID, e.MessageID)
}

func (e *messageNotFoundError) Unwrap() error { return presenters.ErrNotFound }

// readMessages reads what q selects of a session's history from its agent, or from the
// store when the agent is no longer configured; attrs name both for the log.
func (s *Service) readMessages(ctx context.Context, sessionID string, q presenters.MessageQuery) (msgs []presenters.Message, attrs []any, err error) {
	attrs = []any{"session_id", sessionID}
	p, err := s.owner(ctx, sessionID)
	var notConfigured *agentNotConfiguredError
	switch {
	case errors.As(err, &notConfigured):
		// The history outlives its agent.
		attrs = append(attrs, "agent_id", notConfigured.rec.AgentID)
		msgs, err = s.registry.storedMessages(ctx, sessionID, q)
	case err == nil:
		attrs = append(attrs, "agent_id", p.AgentID())
		msgs, err = p.GetMessages(ctx, sessionID, q)
	}
	return msgs, attrs, err
}

// messageForResponse converts a stored message, cut to wire.MaxEventBytes (its largest texts
// end with "[truncated: N bytes]"; a message that cannot be cut enough keeps only an
// error block saying so), and returns its encoded size.
func (s *Service) messageForResponse(ctx context.Context, m presenters.Message) (*pb.SessionMessage, int) {
	out := wire.MessageToPB(m)
	size := proto.Size(out)
	if size <= wire.MaxEventBytes {
		return out, size
	}
	if !wire.FitWithin(out, wire.MaxEventBytes) {
		out.Blocks = []*pb.Block{{Content: &pb.Block_Error{Error: &pb.ErrorBlock{
			Reason:  pb.ErrorReason_ERROR_REASON_MESSAGE_TOO_LARGE,
			Message: fmt.Sprintf("this message takes %d bytes, more than one response may carry, even with its texts cut", size),
		}}}}
	}
	s.logger.WarnContext(ctx, "stored message over the size cap sent cut", "session_id", m.SessionID, "message_id", m.ID, "bytes", size)
	return out, proto.Size(out)
}

// pageSize is a list request's page_size with the default and cap applied.
func pageSize(asked int32) (int, error) {
	switch {
	case asked < 0:
		return 0, invalidArgument("page_size must not be negative (0 means %d, at most %d)", defaultPageSize, maxPageSize)
	case asked == 0:
		return defaultPageSize, nil
	}
	return min(int(asked), maxPageSize), nil
}

// messagePageToken is where a ListMessages page continues. Tokens are opaque to
// clients (base64url of this as JSON); the session and order let a token given to
// another request be refused rather than misread.
type messagePageToken struct {
	Kind    string          `json:"k"`
	Session string          `json:"s"`
	Order   pb.MessageOrder `json:"o"`
	After   string          `json:"a"`
}

const messagePageTokenKind = "messages"

func encodeMessagePageToken(sessionID string, order pb.MessageOrder, after string) string {
	raw, _ := json.Marshal(messagePageToken{Kind: messagePageTokenKind, Session: sessionID, Order: order, After: after}) // cannot fail
	return base64.RawURLEncoding.EncodeToString(raw)
}

// decodeMessagePageToken returns the message a page continues after ("" without a
// token).
func decodeMessagePageToken(token, sessionID string, order pb.MessageOrder) (string, error) {
	if token == "" {
		return "", nil
	}
	var t messagePageToken
	if !decodeToken(token, &t) || t.Kind != messagePageTokenKind || t.After == "" {
		return "", invalidArgument("page_token %q is not one ListMessages issued; pass next_page_token from the previous response unchanged, or leave it empty for the first page", token)
	}
	if t.Session != sessionID {
		return "", invalidArgument("page_token belongs to session %q, not %q; a token continues only the listing it came from", t.Session, sessionID)
	}
	if t.Order != order {
		return "", invalidArgument("page_token continues a listing in order %s, not %s; keep the order while paging, or start again without page_token", t.Order, order)
	}
	return t.After, nil
}

// decodeToken reads a page token into v; false when it is not base64url JSON of v's
// shape.
func decodeToken(token string, v any) bool {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	return err == nil && json.Unmarshal(raw, v) == nil
}
