//go:build !linux

package confine

import (
	"errors"
	"os/exec"
)

// MaybeRunInit returns at once: only Linux runs confined commands.
func MaybeRunInit() { initCalled.Store(true) }

// Probe reports that this system offers no confinement.
func Probe() Support {
	return Support{Namespaces: errors.New("not Linux")}
}

// wrap leaves cmd as it is: with nothing enforceable, only a BestEffort
// policy gets here, and Wrap reports everything as missing.
func wrap(*exec.Cmd, initSpec) error { return nil }
