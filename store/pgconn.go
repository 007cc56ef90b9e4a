package store

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresLimits bound how long the database may keep a replica waiting and how long a
// connection that stopped answering (a partition, a dead peer) may hold locks on the
// server. Without them a transaction cut off mid-way sits "idle in transaction" holding
// its lease rows, and a take-over waits on them for as long as the cut lasts.
type PostgresLimits struct {
	// Stall bounds a connection that went quiet: the server ends a transaction idle for
	// that long (idle_in_transaction_session_timeout) and stops waiting for a lock after it
	// (lock_timeout); both ends give up on a peer that leaves data unacknowledged for it
	// (tcp_user_timeout) or does not answer keepalives within about it.
	Stall time.Duration
	// Statement is the server's statement_timeout: no statement runs longer.
	Statement time.Duration
	// Call bounds each call of a Store on the database, its wait for the write lock
	// included, whatever the caller's own deadline: a server cut off by a partition
	// neither answers nor fails, and no setting on the server ends a wait the server does
	// not know of. A call that runs out of it fails with ErrUnavailable, to be tried
	// again. 0 is no bound but the caller's.
	Call time.Duration
}

// DefaultPostgresLimits are the limits of OpenPostgres.
var DefaultPostgresLimits = PostgresLimits{Stall: 5 * time.Second, Statement: 30 * time.Second, Call: 10 * time.Second}

// postgresConfig is the pgx configuration of dsn with the limits applied: each server
// setting the connection string does not set itself, and a dialer with keepalives and a
// TCP user timeout.
func postgresConfig(dsn string, limits PostgresLimits) (*pgx.ConnConfig, error) {
	config, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	stall := max(limits.Stall, time.Second)
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	secs := func(d time.Duration) string { return strconv.FormatInt(max(int64(d/time.Second), 1), 10) }
	settings := map[string]string{
		"statement_timeout":                   ms(max(limits.Statement, stall)),
		"idle_in_transaction_session_timeout": ms(stall),
		"lock_timeout":                        ms(stall),
		"tcp_user_timeout":                    ms(stall),
		"tcp_keepalives_idle":                 secs(stall / 2),
		"tcp_keepalives_interval":             secs(stall / 4),
		"tcp_keepalives_count":                "2",
	}
	for k, v := range settings {
		if _, set := config.RuntimeParams[k]; !set {
			config.RuntimeParams[k] = v
		}
	}
	if config.ConnectTimeout == 0 || config.ConnectTimeout > 2*stall {
		config.ConnectTimeout = 2 * stall
	}
	dialer := &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: stall / 2, Interval: max(stall/4, time.Second), Count: 2},
		Control: func(network, address string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = setUserTimeout(fd, stall) })
			if err != nil {
				return err
			}
			return serr
		},
	}
	config.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", addr, err)
		}
		return conn, nil
	}
	return config, nil
}
