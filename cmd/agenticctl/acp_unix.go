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
	orig := int(f.Fd())
	fd, err := unix.Dup(orig)
	if err != nil {
		return f
	}
	unix.CloseOnExec(fd)
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		_ = unix.Close(fd)
		return f
	}
	return nonblockingStdin{File: os.NewFile(uintptr(fd), f.Name()), orig: orig, wasBlocking: flags&unix.O_NONBLOCK == 0}
}

// nonblockingStdin is the duplicate. The mode belongs to the open file, which stdin
// (orig) and whatever else shares it (a terminal, a shell's pipe) see too: Close gives
// it back.
type nonblockingStdin struct {
	*os.File
	orig        int
	wasBlocking bool
}

func (s nonblockingStdin) Close() error {
	err := s.File.Close()
	if s.wasBlocking {
		_ = unix.SetNonblock(s.orig, false)
	}
	return err
}
