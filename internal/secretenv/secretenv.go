// Package secretenv keeps secrets that arrive as environment variables out of the
// process's environment block. os.Unsetenv changes only the Go copy: the kernel keeps
// the block the process was started with, and /proc/<pid>/environ shows it to every
// process of the same user. Reexec starts the program again without the variables,
// handing their values over in an anonymous memory file that is closed once read.
package secretenv

import (
	"os"
	"sync"
)

// fdEnv names the descriptor of the memory file in the re-executed program.
const fdEnv = "AGENTICD_SECRETS_FD"

var (
	mu     sync.Mutex
	values = map[string]string{}
)

// Lookup returns a secret's value: the one Reexec handed over, else the environment's.
// Either way the variable is then gone from the Go environment, so that children do not
// inherit it.
func Lookup(name string) (string, bool) {
	mu.Lock()
	v, ok := values[name]
	delete(values, name)
	mu.Unlock()
	if !ok {
		v, ok = os.LookupEnv(name)
	}
	_ = os.Unsetenv(name)
	return v, ok
}
