//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package main

import (
	"errors"
	"os"
)

// isTerminal is false where agenticctl cannot tell: it then behaves as with pipes.
func isTerminal(any) bool { return false }

type lineReader struct{}

func startLineReader(*os.File, chan<- terminalLine) (*lineReader, error) {
	return nil, errors.New("reading answers from the terminal is not supported on this system")
}

func (*lineReader) stop() {}
