// Package confine runs a command inside an operating-system boundary: its
// own user, PID and mount namespaces with a private /proc, and a Landlock
// ruleset that limits the files it may read, write and execute.
//
// The boundary is set up by a tiny init: Policy.Wrap rewrites an exec.Cmd
// to re-execute the current binary (/proc/self/exe) in new namespaces, and
// MaybeRunInit, called first thing in main, turns that re-executed copy
// into the init. The init makes its mounts private, mounts /proc for its
// PID namespace and a devpts instance of its own over /dev/pts, covers the
// Unix sockets the command may not reach (see Policy), enters the command's
// working directory (see Wrap), applies Landlock, drops its capabilities,
// starts the command as its only child, forwards termination signals to
// it, reaps orphans and, when the command ends, exits with its status.
// Its exit as PID 1 makes the kernel kill whatever else is left in the
// namespace (setsid'd and double-forked processes included), so nothing
// outlives the command.
package confine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// Sentinel errors; returned errors wrap one of them and say what to fix.
var (
	// ErrUnsupported: this kernel cannot enforce the policy (and the policy
	// did not ask for BestEffort).
	ErrUnsupported = errors.New("confinement not supported here")
	// ErrInvalidPolicy: a path in the policy or the command's working
	// directory is unusable, or the command itself lies outside the paths the
	// policy lets it execute.
	ErrInvalidPolicy = errors.New("invalid confinement policy")
	// ErrNoInit: MaybeRunInit was not called at the start of main, so the
	// re-executed binary would run the program instead of the init.
	ErrNoInit = errors.New("confine.MaybeRunInit was not called at the start of main")
)

// Exit codes of the init when the command could not be run, as a container
// runtime reports them: the command's own codes pass through unchanged.
const (
	// ExitSetupFailed: the boundary could not be set up (the command did not run).
	ExitSetupFailed = 125
	// ExitCannotExecute: the command exists but could not be executed
	// (permission denied, also by Landlock).
	ExitCannotExecute = 126
	// ExitNotFound: the command does not exist.
	ExitNotFound = 127
)

// Policy says what a confined command may touch. Paths are absolute and
// must exist; everything below a directory is covered.
//
// Always granted: /dev/null and /dev/full (read-write files), /dev/zero,
// /dev/random and /dev/urandom (read), and, inside the PID namespace, a
// read-only /proc that shows only the command's own processes. Network
// access is not restricted.
//
// Never reachable, whatever the paths: other processes' terminals (/dev/pts
// is a devpts instance of the command's own; the terminal it was started
// on stays usable through the descriptors it inherits), and Unix sockets
// bound to a path outside ReadWrite. Landlock restricts connect(2) to such
// sockets only from ABI 9 on; before that the init covers each socket the
// host lists in /proc/net/unix with /dev/null, and /run/user/<uid> (a
// session bus, an SSH or GPG agent) with an empty read-only tmpfs. A
// socket bound after the command started, outside /run/user/<uid>, is not
// covered. Abstract sockets outside the command's Landlock domain are
// refused by Landlock's scoping from ABI 6 on.
type Policy struct {
	// ReadOnly may be read and executed: system directories (/usr, /etc),
	// the agent's installation, declared read paths.
	ReadOnly []string
	// ReadWrite may also be written, created in, removed from, and renamed
	// or linked across (between any two of these directories): the
	// workspace, a private temp dir, declared state dirs.
	ReadWrite []string
	// Pty grants /dev/ptmx, /dev/pts and /dev/tty with terminal ioctls, for
	// commands that open terminals themselves (node-pty, codex's tty tools).
	// A command started on a pty needs no grant to use the pty it inherits.
	Pty bool
	// BestEffort runs the command with what this machine can enforce
	// instead of failing; Wrap then returns what is missing.
	BestEffort bool
	// Limits bound the tree's processes, memory, file sizes and priority.
	Limits Limits
	// Group, when not nil, holds the tree in control groups of its own (NewGroup).
	Group *Group
	// Network, when not nil, restricts the TCP ports the command may connect to
	// (Landlock ABI 4 and newer); nil leaves the network open.
	Network *Network
}

// Landlock ABIs the boundary depends on.
const (
	// minLandlockABI is the minimum for filesystem confinement: ABI 2 adds
	// the refer right (renames across directories), ABI 3 restricts
	// truncate(2), without which a command could empty any file it may read.
	minLandlockABI = 3
	// scopeLandlockABI scopes abstract Unix sockets and signals to the
	// command's own domain.
	scopeLandlockABI = 6
	// unixConnectLandlockABI restricts connect(2) to pathname Unix sockets;
	// before it the init covers them with mounts.
	unixConnectLandlockABI = 9
)

// Support is what this machine offers for confinement.
type Support struct {
	// LandlockABI is the kernel's Landlock ABI version, 0 without Landlock.
	LandlockABI int
	// Namespaces is nil when user, PID and mount namespaces with a private
	// /proc work; otherwise it says why not.
	Namespaces error
	// Devpts is nil when the init can mount a devpts instance of its own
	// over /dev/pts; otherwise it says why not. The init then covers
	// /dev/pts with an empty read-only directory: other terminals stay out
	// of reach, but the command cannot open new ones (node-pty, tty tools).
	Devpts error
	// Root: agenticd runs as uid 0, for whom the kernel never enforces RLIMIT_NPROC.
	Root bool
	// PidsCgroup and MemoryCgroup are agenticd's own cgroup v1 directories of those
	// controllers where it may create a Group, else "".
	PidsCgroup, MemoryCgroup string
}

// Missing lists the parts of the boundary this machine cannot enforce,
// each a sentence saying what is lost; empty when everything works.
func (s Support) Missing() []string {
	var missing []string
	if s.LandlockABI < minLandlockABI {
		missing = append(missing, fmt.Sprintf(
			"filesystem confinement: Landlock ABI %d, need %d (Linux 6.2 or newer with Landlock enabled): the command can read and write every file its user can",
			s.LandlockABI, minLandlockABI))
	}
	if s.LandlockABI >= minLandlockABI && s.LandlockABI < scopeLandlockABI {
		lost := "the command can connect to abstract Unix sockets outside its sandbox (an X server, a D-Bus bus)"
		if s.Namespaces != nil {
			lost += " and signal its user's other processes"
		}
		missing = append(missing, fmt.Sprintf("IPC scoping: Landlock ABI %d, need %d (Linux 6.12 or newer): %s",
			s.LandlockABI, scopeLandlockABI, lost))
	}
	if s.Namespaces != nil {
		lost := "the command's background processes can outlive it, it can read other processes' /proc/<pid>/environ and open its user's other terminals (/dev/pts)"
		if s.LandlockABI < unixConnectLandlockABI {
			lost += ", and connect to every Unix socket its user can (a session bus, docker.sock, an SSH agent)"
		}
		missing = append(missing, fmt.Sprintf("process confinement: %v: %s", s.Namespaces, lost))
	}
	return missing
}

// ConfinesFiles reports whether Landlock can bound the files a command reaches.
func (s Support) ConfinesFiles() bool { return s.LandlockABI >= minLandlockABI }

// String is a one-line summary for logs and status output.
func (s Support) String() string {
	ns := "user+PID+mount namespaces ok"
	switch {
	case s.Namespaces != nil:
		ns = "namespaces unavailable: " + s.Namespaces.Error()
	case s.Devpts != nil:
		ns += ", no devpts of its own (" + s.Devpts.Error() + "): /dev/pts hidden, commands cannot open new terminals"
	}
	if s.LandlockABI == 0 {
		return "Landlock unavailable, " + ns
	}
	return fmt.Sprintf("Landlock ABI %d, %s", s.LandlockABI, ns)
}

// initCalled records that MaybeRunInit ran in this process, so that Wrap
// and Probe can refuse to re-execute a binary that would not become an init.
var initCalled atomic.Bool

// Wrap rewrites cmd, which must not have been started, so that starting it
// runs the same command confined by p. It keeps cmd's working directory
// (see below), Env, stdio, ExtraFiles (set them before Wrap) and
// SysProcAttr, adding the namespace flags to the latter, and Pdeathsig
// SIGKILL unless one is set; pty.Start and Setpgid/Setsid compose with
// it. SysProcAttr.Credential is not supported (the user namespace maps
// only the caller's own uid and gid).
//
// The command starts in cmd.Dir as a path of its own mount namespace: the
// init enters it once its mounts are set up (Wrap clears cmd.Dir), and only
// if it is still the directory cmd.Dir named when Wrap ran (same device and
// inode); else the command does not run (ExitSetupFailed). cmd.Dir may name
// a directory the caller holds open as /proc/self/fd/N: the command then
// starts in that very directory, wherever it has moved, or not at all. (A
// directory the command entered before its namespace existed, or through a
// descriptor, would lie in the host's mount tree: getcwd fails there for an
// ordinary user, and paths relative to it pass around the init's mounts.)
//
// Without BestEffort, Wrap fails with ErrUnsupported when this machine
// cannot enforce all of p; with it, Wrap confines as far as it can and
// returns what is missing (see Support.Missing).
//
// Killing the started process (the init) with SIGKILL kills the command and
// everything it started. SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and
// SIGUSR2 sent to it are forwarded to the command's process group. The
// process exits with the command's exit code, 128+n when signal n killed
// the command, or ExitSetupFailed, ExitCannotExecute or ExitNotFound (with
// a message on stderr) when the command did not run.
func (p Policy) Wrap(cmd *exec.Cmd) (missing []string, err error) {
	if !initCalled.Load() {
		return nil, ErrNoInit
	}
	if cmd.Process != nil {
		return nil, fmt.Errorf("%w: command %q was already started", ErrInvalidPolicy, cmd.Path)
	}
	if len(cmd.Args) > 0 && cmd.Args[0] == initArgv0 {
		return nil, fmt.Errorf("%w: command %q is already wrapped", ErrInvalidPolicy, cmd.Args[1:])
	}
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	readOnly, err := resolvePaths("read-only", p.ReadOnly)
	if err != nil {
		return nil, err
	}
	readWrite, err := resolvePaths("read-write", p.ReadWrite)
	if err != nil {
		return nil, err
	}
	if err := p.Limits.Check(); err != nil {
		return nil, err
	}
	support := Probe()
	missing = append(support.Missing(), p.networkMissing(support)...)
	if len(missing) > 0 && !p.BestEffort {
		return nil, fmt.Errorf("%w: %s (%s); set BestEffort to run with less", ErrUnsupported, strings.Join(missing, "; "), support)
	}
	spec := initSpec{
		Path:         cmd.Path,
		ReadOnly:     readOnly,
		ReadWrite:    readWrite,
		Pty:          p.Pty,
		Landlock:     support.LandlockABI >= minLandlockABI,
		Namespaces:   support.Namespaces == nil,
		CoverSockets: support.Namespaces == nil && support.LandlockABI < unixConnectLandlockABI,
		ExtraFiles:   len(cmd.ExtraFiles),
		Limits:       limitSpec{Limits: p.Limits, Groups: p.Group.paths()},
		Network:      p.Network,
	}
	if spec.Landlock {
		if err := checkExecutable(cmd, readOnly, readWrite); err != nil {
			return nil, err
		}
	}
	if err := wrap(cmd, spec); err != nil {
		return nil, err
	}
	return missing, nil
}

// resolvePaths checks that each path is absolute and exists, and returns
// them cleaned.
func resolvePaths(kind string, paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, path := range paths {
		if !filepath.IsAbs(path) {
			return nil, fmt.Errorf("%w: %s path %q is not absolute", ErrInvalidPolicy, kind, path)
		}
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%w: %s path: %v (create it first or leave it out)", ErrInvalidPolicy, kind, err)
		}
		out = append(out, filepath.Clean(path))
	}
	return out, nil
}

// checkExecutable fails when Landlock would deny executing the command
// because its file lies under none of the policy's paths: a clear error
// now beats exit code 126 later. (A script's interpreter is not checked.)
func checkExecutable(cmd *exec.Cmd, readOnly, readWrite []string) error {
	path := cmd.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(cmd.Dir, path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("%w: command: %v", ErrInvalidPolicy, err)
	}
	for _, dir := range append(append([]string{}, readOnly...), readWrite...) {
		realDir, err := filepath.EvalSymlinks(dir)
		if err != nil {
			continue
		}
		if real == realDir || strings.HasPrefix(real, strings.TrimSuffix(realDir, "/")+"/") {
			return nil
		}
	}
	return fmt.Errorf("%w: command %q (%s) is outside the policy's paths; add its directory to ReadOnly", ErrInvalidPolicy, cmd.Path, real)
}

// initSpec is what the init needs to know, passed to it as JSON in the
// initEnv environment variable.
type initSpec struct {
	Path       string   // the command's file
	ReadOnly   []string `json:",omitempty"`
	ReadWrite  []string `json:",omitempty"`
	Pty        bool     `json:",omitempty"`
	Landlock   bool     `json:",omitempty"` // apply Landlock
	Namespaces bool     `json:",omitempty"` // running in new namespaces: mount /proc and /dev/pts
	// CoverSockets: cover the pathname Unix sockets outside ReadWrite, which
	// this kernel's Landlock does not restrict.
	CoverSockets bool `json:",omitempty"`
	ExtraFiles   int  `json:",omitempty"` // inherited descriptors beyond stdio to pass on
	// Limits are set before the command starts (applyLimits).
	Limits limitSpec `json:",omitzero"`
	// Network restricts TCP connections (restrictFiles); nil leaves them open.
	Network *Network `json:",omitempty"`
	// Dir is the directory the init enters for the command, a path in its mount
	// namespace; DirDev and DirIno identify the directory Wrap found there, which
	// the init must find too.
	Dir    string `json:",omitempty"`
	DirDev uint64 `json:",omitempty"`
	DirIno uint64 `json:",omitempty"`
	// Env is the command's environment. The init itself starts with none but its
	// marker: a variable such as LD_PRELOAD from a request would otherwise run code in
	// the init (a dynamically linked agenticd) before the boundary is up.
	Env []string `json:",omitempty"`
}

// Environment variables that turn the re-executed binary into the init or
// into the namespace probe. The init removes them before starting the command.
const (
	initEnv  = "AGENTICD_CONFINE_INIT"
	probeEnv = "AGENTICD_CONFINE_PROBE"
)

// initArgv0 names the init in process listings.
const initArgv0 = "agenticd-confine"
