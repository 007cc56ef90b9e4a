package secretenv

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Reexec, called first thing in main, moves the named variables out of the environment.
// In a program started with any of them set it re-executes the same binary with the same
// arguments, without them, and does not return unless that fails. In the re-executed
// program (and in one started without them) it reads the handed-over values, for
// Lookup, and returns.
func Reexec(names ...string) error {
	if fd, ok := os.LookupEnv(fdEnv); ok {
		_ = os.Unsetenv(fdEnv)
		return receive(fd)
	}
	var payload bytes.Buffer
	for _, name := range names {
		if v, ok := os.LookupEnv(name); ok {
			if strings.ContainsRune(name, 0) || strings.ContainsRune(v, 0) {
				return fmt.Errorf("%s holds a NUL byte", name)
			}
			payload.WriteString(name + "\x00" + v + "\x00")
		}
	}
	if payload.Len() == 0 {
		return nil
	}
	// Not close-on-exec: the re-executed program inherits it.
	fd, err := unix.MemfdCreate("agenticd-secrets", 0)
	if err != nil {
		return fmt.Errorf("hand secrets over: %w", err)
	}
	f := os.NewFile(uintptr(fd), "agenticd-secrets")
	if _, err := f.Write(payload.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("hand secrets over: %w", err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, k) || k == fdEnv
	})
	env = append(env, fdEnv+"="+strconv.Itoa(fd))
	err = syscall.Exec("/proc/self/exe", os.Args, env)
	f.Close()
	return fmt.Errorf("re-execute without the secrets in the environment: %w", err)
}

func receive(fdText string) error {
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 3 {
		return fmt.Errorf("%s=%q is not a descriptor", fdEnv, fdText)
	}
	f := os.NewFile(uintptr(fd), "agenticd-secrets")
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read the handed-over secrets: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read the handed-over secrets: %w", err)
	}
	fields := strings.Split(string(data), "\x00")
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i+1 < len(fields); i += 2 {
		values[fields[i]] = fields[i+1]
	}
	return nil
}
