//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package main

import (
	"io"
	"os"
)

// closableStdin is stdin: here a signal ends the process without waiting for its read.
func closableStdin(f *os.File) io.ReadCloser { return f }
