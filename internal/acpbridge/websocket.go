package acpbridge

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/coder/websocket"
)

const (
	// maxMessageBytes is the largest JSON-RPC message taken from an editor, the SDK's own
	// limit for a line on stdio.
	maxMessageBytes = 10 << 20
	// writeTimeout bounds sending one message: an editor that stops reading loses the
	// connection rather than stall the session's followers.
	writeTimeout = 30 * time.Second
)

// ServeWebSocket upgrades r to a WebSocket and serves ACP on it, one JSON-RPC message
// per text message, until the editor leaves or ctx ends. The caller has checked the
// request's credentials and origin.
func ServeWebSocket(ctx context.Context, w http.ResponseWriter, r *http.Request, opts Options) error {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// The caller checked the Origin against agenticd's own rules, which allow
		// configured origins besides the server's own.
		InsecureSkipVerify: true,
	})
	if err != nil {
		return err
	}
	c.SetReadLimit(maxMessageBytes)
	ws := &wsStream{c: c}
	return Serve(ctx, opts, ws, ws)
}

// wsStream carries the SDK's newline-delimited messages over WebSocket messages.
type wsStream struct {
	c   *websocket.Conn
	buf []byte // the rest of the message being read, with its newline
}

func (s *wsStream) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		// Closing the connection ends a Read in progress.
		_, data, err := s.c.Read(context.Background())
		if err != nil {
			return 0, err
		}
		s.buf = append(bytes.TrimRight(data, "\r\n"), '\n')
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// Write sends one message: the SDK writes each message whole, in one call.
func (s *wsStream) Write(p []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	if err := s.c.Write(ctx, websocket.MessageText, bytes.TrimRight(p, "\n")); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *wsStream) Close() error {
	return s.c.Close(websocket.StatusGoingAway, "agenticd ends the connection")
}
