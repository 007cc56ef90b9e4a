package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
)

// On Postgres every append to the event log notifies the channel eventsChannel, on
// commit, of the sessions it appended to; ListenEvents wakes on those notifications, so
// that replicas learn of each other's events without polling.

// eventsChannel is the Postgres notification channel of the event log. Channels are per
// database: stores on other schemas of the same database hear each other's appends too.
const eventsChannel = "agenticd_events"

// maxNotifyPayload is the longest payload notifyPayload names sessions in; Postgres
// refuses payloads of 8000 bytes or more.
const maxNotifyPayload = 7900

// ErrNotPostgres is the error of ListenEvents on a store that is not on Postgres.
var ErrNotPostgres = errors.New("event notifications need a Postgres database")

// notifyPayload names a batch's sessions (its distinct ids) for listeners: joined by ","
// (an agent's events, of session id "", as an empty item), or "*", all sessions, when that
// would be longer than maxNotifyPayload or an id holds a comma.
func notifyPayload(sessions []string) string {
	var b strings.Builder
	for i, id := range sessions {
		if strings.Contains(id, ",") {
			return "*"
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id)
		if b.Len() > maxNotifyPayload {
			return "*"
		}
	}
	return b.String()
}

// notifyEvents queues the batch's notification in tx: Postgres delivers it when tx
// commits, and never when it rolls back.
func notifyEvents(ctx context.Context, tx *sql.Tx, sessions []string) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_notify('`+eventsChannel+`', $1)`, notifyPayload(sessions))
	return err
}

// Reconnection delays of ListenEvents: the first, doubled on each failure up to the
// last.
const (
	listenRetryFirst = 100 * time.Millisecond
	listenRetryLast  = 5 * time.Second
)

// ListenEvents checks its connection when no notification came for listenPingInterval:
// a Ping that fails or takes longer than listenPingTimeout gives the connection up, as if
// it had dropped, so that one left half-open (by a database failover, say) is not
// trusted until TCP keepalive notices. Variables for tests.
var (
	listenPingInterval = 10 * time.Second
	listenPingTimeout  = 5 * time.Second
)

// ListenEvents calls wake for every append to the event log of this database, by any
// store, once committed: with the sessions it appended to ("" for an agent's events), or
// with all set when it named none. Each time it starts listening, at first and after
// reconnecting when its connection dropped, it calls wake(nil, true), since appends may
// have gone unheard before. wake runs on ListenEvents' goroutine, one call at a time.
// ListenEvents holds a connection of its own, and returns nil when ctx ends; on a store
// that is not on Postgres it returns ErrNotPostgres at once.
func (s *Store) ListenEvents(ctx context.Context, logger *slog.Logger, wake func(sessionIDs []string, all bool)) error {
	if s.dialect != postgresDialect {
		return ErrNotPostgres
	}
	d, ok := s.db.Dialector.(*postgres.Dialector)
	if !ok || d.DSN == "" {
		return errors.New("listen to the event log: the store's Postgres database was opened without a connection string")
	}
	config, err := postgresConfig(d.DSN, limitsOf(s.db))
	if err != nil {
		return fmt.Errorf("listen to the event log on %s: %w", RedactDSN(d.DSN), err)
	}
	retry := listenRetryFirst
	outage := false
	for {
		conn, err := listen(ctx, config)
		if err == nil {
			if outage {
				logger.Info("listening to the event log's notifications again")
				outage = false
			}
			retry = listenRetryFirst
			wake(nil, true)
			err = receive(ctx, conn, wake)
			closeListener(conn)
		}
		if ctx.Err() != nil {
			return nil
		}
		if !outage {
			logger.Warn("lost the event log's notifications; reconnecting", "database", RedactDSN(d.DSN), "err", err)
			outage = true
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		retry = min(2*retry, listenRetryLast)
	}
}

// listen connects and listens to eventsChannel.
func listen(ctx context.Context, config *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+eventsChannel); err != nil {
		closeListener(conn)
		return nil, err
	}
	return conn, nil
}

// receive calls wake for each notification until the connection fails or ctx ends. When
// none came for listenPingInterval it pings the connection, and returns the error of a
// Ping that fails.
func receive(ctx context.Context, conn *pgx.Conn, wake func(sessionIDs []string, all bool)) error {
	for {
		idle, cancel := context.WithTimeout(ctx, listenPingInterval)
		n, err := conn.WaitForNotification(idle)
		idled := idle.Err() != nil && ctx.Err() == nil
		cancel()
		if n != nil {
			if n.Payload == "*" {
				wake(nil, true)
			} else {
				wake(strings.Split(n.Payload, ","), false)
			}
		}
		if err == nil {
			continue
		}
		if !idled || conn.IsClosed() {
			return err // the connection failed, or ctx ended
		}
		pingCtx, cancel := context.WithTimeout(ctx, listenPingTimeout)
		err = conn.Ping(pingCtx)
		cancel()
		if err != nil {
			return fmt.Errorf("ping the listening connection: %w", err)
		}
	}
}

// closeListener closes conn and waits until its resources are released, so that no
// goroutine of it outlives ListenEvents.
func closeListener(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
	<-conn.PgConn().CleanupDone()
}
