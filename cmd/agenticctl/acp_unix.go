//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// closableStdin is stdin such that closing it ends a read in progress: a duplicate of its
// descriptor in non-blocking mode, which Go's poller can interrupt. So a signal ends
// `agenticctl acp` while the editor still holds its end of the pipe open. Where that
// cannot be had, stdin as it is.
func closableStdin(f *os.File) io.ReadCloser {
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return f
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return f
	}
	return os.NewFile(uintptr(fd), f.Name())
}
