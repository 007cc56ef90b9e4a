package store

import (
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout makes the kernel drop a TCP connection whose sent data stays
// unacknowledged for d (a Unix socket ignores it).
func setUserTimeout(fd uintptr, d time.Duration) error {
	err := unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	if err == unix.EOPNOTSUPP || err == unix.ENOPROTOOPT {
		return nil
	}
	return err
}
