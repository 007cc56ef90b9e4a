//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package main

import (
	"bytes"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether v is a file open on a terminal. A character device is not
// enough: /dev/null is one too.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok || f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlReadTermios)
	return err == nil
}

// lineReader reads the lines typed at a terminal on its own goroutine until stopped.
// It waits in poll(2) beside a pipe of its own rather than in read(2), so that stop
// ends it at once and input typed afterwards stays for whoever reads next.
type lineReader struct {
	wake *os.File // closing it wakes the goroutine
	quit chan struct{}
	done chan struct{}
}

// startLineReader delivers each line typed at tty (without its newline) to lines; at the
// end of input (Ctrl-D on an empty line) it delivers eof and ends.
func startLineReader(tty *os.File, lines chan<- terminalLine) (*lineReader, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	lr := &lineReader{wake: w, quit: make(chan struct{}), done: make(chan struct{})}
	fd := int(tty.Fd())
	go func() {
		defer close(lr.done)
		defer func() { _ = r.Close() }()
		deliver := func(l terminalLine) bool {
			select {
			case lines <- l:
				return true
			case <-lr.quit:
				return false
			}
		}
		var partial []byte
		buf := make([]byte, 4096)
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(r.Fd()), Events: unix.POLLIN}}
			if _, err := unix.Poll(fds, -1); err != nil {
				if errors.Is(err, unix.EINTR) {
					continue
				}
				deliver(terminalLine{err: err})
				return
			}
			if fds[1].Revents != 0 {
				return
			}
			if fds[0].Revents == 0 {
				continue
			}
			n, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
				continue
			}
			if err != nil || n == 0 {
				deliver(terminalLine{eof: true, err: err})
				return
			}
			partial = append(partial, buf[:n]...)
			for {
				i := bytes.IndexByte(partial, '\n')
				if i < 0 {
					break
				}
				line := string(bytes.TrimRight(partial[:i], "\r"))
				partial = partial[i+1:]
				if !deliver(terminalLine{text: line}) {
					return
				}
			}
		}
	}()
	return lr, nil
}

// stop ends the reader and waits for its goroutine.
func (lr *lineReader) stop() {
	close(lr.quit)
	_ = lr.wake.Close()
	<-lr.done
}
