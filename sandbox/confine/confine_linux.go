package confine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// selfExe is the running binary; the kernel resolves it even after the
// file on disk was replaced or removed.
const selfExe = "/proc/self/exe"

// MaybeRunInit must be the first thing main (and TestMain) does. In the
// process Policy.Wrap started it runs the init and exits, never returning;
// anywhere else it returns at once.
func MaybeRunInit() {
	initCalled.Store(true)
	if spec, ok := os.LookupEnv(initEnv); ok {
		os.Exit(runInit(spec))
	}
	if _, ok := os.LookupEnv(probeEnv); ok {
		os.Exit(runProbe())
	}
}

var (
	probeOnce   sync.Once
	probeResult Support
)

// Probe reports what this machine supports. The namespace check starts a
// real process in new namespaces once (a few milliseconds); the result is
// cached for the life of the process.
func Probe() Support {
	if !initCalled.Load() {
		return Support{LandlockABI: landlockABI(), Namespaces: ErrNoInit}
	}
	probeOnce.Do(func() {
		probeResult = Support{LandlockABI: landlockABI()}
		probeResult.Namespaces, probeResult.Devpts = probeNamespaces()
		probeResult.Root = os.Getuid() == 0
		probeResult.PidsCgroup, probeResult.MemoryCgroup = probeGroups()
	})
	return probeResult
}

func landlockABI() int {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return abi
}

// probeNoDevpts is the probe's exit code when the namespaces work but devpts
// could not be mounted (its reason on stderr).
const probeNoDevpts = 3

// probeNamespaces runs the namespace probe: this binary, re-executed in new
// user, PID and mount namespaces, doing the init's mount steps. It returns
// why the namespaces cannot be used, else nil and why devpts cannot be.
func probeNamespaces() (namespaces, devpts error) {
	cmd := exec.Command(selfExe)
	cmd.Args = []string{initArgv0 + "-probe"}
	cmd.Env = []string{probeEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	addNamespaces(cmd.SysProcAttr)
	out, err := cmd.CombinedOutput()
	msg := strings.TrimSpace(string(out))
	if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == probeNoDevpts {
		return nil, errors.New(msg)
	}
	if err != nil {
		if msg != "" {
			return fmt.Errorf("%v: %s", err, msg), nil
		}
		return err, nil
	}
	return nil, nil
}

func runProbe() int {
	if err := setupNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	devpts, err := privateTerminals()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if devpts != nil {
		fmt.Fprintln(os.Stderr, devpts)
		return probeNoDevpts
	}
	return 0
}

// addNamespaces makes the process start in new user, PID and mount
// namespaces, mapping the caller's uid and gid to themselves so that files
// it creates keep their real owner.
func addNamespaces(attr *syscall.SysProcAttr) {
	attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
	// An unprivileged user may map its gid only after denying setgroups(2).
	attr.GidMappingsEnableSetgroups = false
	// A process mapped to a uid other than 0 loses its capabilities in the
	// new namespace at exec; the init keeps the two it needs, to mount and
	// to empty the capability bounding set, and drops them before starting
	// the command.
	attr.AmbientCaps = append(attr.AmbientCaps, unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP)
}

func wrap(cmd *exec.Cmd, spec initSpec) error {
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	spec.Env = slices.DeleteFunc(lastOfEach(env), func(kv string) bool {
		return strings.HasPrefix(kv, initEnv+"=") || strings.HasPrefix(kv, probeEnv+"=")
	})
	if spec.Namespaces && cmd.Dir != "" {
		if err := passDir(cmd, &spec); err != nil {
			return err
		}
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode confinement spec: %w", err)
	}
	cmd.Env = []string{initEnv + "=" + string(specJSON)}
	args := cmd.Args
	if len(args) == 0 {
		args = []string{cmd.Path} // what exec.Cmd runs for empty Args
	}
	cmd.Args = append([]string{initArgv0}, args...)
	cmd.Path = selfExe
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if spec.Namespaces {
		addNamespaces(cmd.SysProcAttr)
	}
	// If agenticd dies, its confined commands die with it (the init's
	// death ends its namespace). Like every Pdeathsig this follows the
	// thread that started the process: do not start confined commands from
	// a goroutine that locks its thread and then exits.
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	return nil
}

// passDir leaves cmd.Dir to the init (see enterDir): the directory it names
// now, identified by device and inode, and the path that directory has (a
// /proc/self/fd/N link and other symlinks resolved), which the copy of the
// mount tree in the command's namespace names too. The starter itself would
// enter it before the namespace existed, or, through a descriptor, in the
// host's tree.
func passDir(cmd *exec.Cmd, spec *initSpec) error {
	var st unix.Stat_t
	if err := unix.Stat(cmd.Dir, &st); err != nil {
		return fmt.Errorf("%w: working directory %s: %v (create it first)", ErrInvalidPolicy, cmd.Dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%w: working directory %s is not a directory", ErrInvalidPolicy, cmd.Dir)
	}
	path, err := filepath.EvalSymlinks(cmd.Dir)
	if err == nil {
		path, err = filepath.Abs(path)
	}
	if err != nil {
		return fmt.Errorf("%w: working directory %s: %v", ErrInvalidPolicy, cmd.Dir, err)
	}
	spec.Dir, spec.DirDev, spec.DirIno = path, st.Dev, st.Ino
	cmd.Dir = ""
	return nil
}

// enterDir makes spec.Dir the working directory, once the namespace's mounts
// are set up: getcwd then names it, and paths relative to it walk the
// namespace's own tree, covers included. It refuses any directory but the one
// Wrap identified: one swapped for a symlink or another directory since then
// must not move the command out of where its starter checked it belongs.
func enterDir(spec initSpec) error {
	if err := unix.Chdir(spec.Dir); err != nil {
		return fmt.Errorf("confine: enter working directory %s: %w", spec.Dir, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(".", &st); err != nil {
		return fmt.Errorf("confine: working directory %s: %w", spec.Dir, err)
	}
	if st.Dev != spec.DirDev || st.Ino != spec.DirIno {
		return fmt.Errorf("confine: working directory %s was replaced after it was checked (a symlink or another directory put in its place); the command did not run, start it again", spec.Dir)
	}
	return nil
}

// setupNamespace runs first in the new namespaces: it keeps mount changes
// from propagating back to the host and mounts a /proc that shows only this
// PID namespace, hiding every outside process (agenticd's environment
// included). It must precede Landlock, which forbids mounting, and which
// (in cgo builds, before Landlock ABI 8) reaches every thread by listing
// /proc/<getpid()>/task: that needs the namespace's own /proc.
func setupNamespace() error {
	if os.Getpid() != 1 {
		return fmt.Errorf("confine: init is pid %d, not 1: no PID namespace", os.Getpid())
	}
	if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("confine: make mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("confine: mount /proc: %w", err)
	}
	return nil
}

// privateTerminals puts a devpts instance of the namespace's own over
// /dev/pts, and its ptmx over /dev/ptmx, so that the command reaches no
// terminal but those it opens (its own, inherited as descriptors, keeps
// working). Where devpts cannot be mounted it covers /dev/pts with an empty
// read-only tmpfs instead and returns why in devpts: the host's terminals
// stay hidden, and /dev/ptmx, finding no devpts beside it, opens nothing.
// err means neither worked.
func privateTerminals() (devpts, err error) {
	if _, err := os.Stat("/dev/pts"); err != nil {
		return nil, nil // no terminals to hide
	}
	devpts = unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
	if devpts != nil {
		devpts = fmt.Errorf("mount devpts: %w", devpts)
		if err := unix.Mount("tmpfs", "/dev/pts", "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=4k"); err != nil {
			return devpts, fmt.Errorf("confine: hide /dev/pts (%v): mount tmpfs: %w", devpts, err)
		}
		return devpts, nil
	}
	if _, err := os.Lstat("/dev/ptmx"); err == nil {
		if err := unix.Mount("/dev/pts/ptmx", "/dev/ptmx", "", unix.MS_BIND, ""); err != nil {
			return nil, fmt.Errorf("confine: bind /dev/pts/ptmx over /dev/ptmx: %w", err)
		}
	}
	return nil, nil
}

// coverSockets keeps the command from connecting to pathname Unix sockets
// outside granted (the paths it may write), for kernels whose Landlock does
// not restrict connect(2): it mounts an empty read-only tmpfs over
// /run/user/<uid> (unless a policy path lies in it or it in a granted one),
// which also covers sockets bound there later, then /dev/null over every
// other socket the host lists in /proc/net/unix (the init shares the host's
// network namespace, hence its list). A socket gone or out of reach (the
// command could not reach it either) is skipped; one bound with a relative
// path cannot be found and is not covered.
func coverSockets(granted, policyPaths []string) error {
	granted = realPaths(granted)
	runtimeDir := fmt.Sprintf("/run/user/%d", os.Getuid())
	if real, err := filepath.EvalSymlinks(runtimeDir); err == nil && isDir(real) &&
		!inAny(real, granted) && !slices.ContainsFunc(realPaths(policyPaths), func(p string) bool { return within(p, real) }) {
		if err := unix.Mount("tmpfs", real, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,size=4k"); err != nil {
			return fmt.Errorf("confine: cover %s: %w", runtimeDir, err)
		}
	}
	list, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return fmt.Errorf("confine: list Unix sockets: %w", err)
	}
	for _, path := range socketPaths(list) {
		dir, err := filepath.EvalSymlinks(filepath.Dir(path))
		if err != nil {
			continue
		}
		real := filepath.Join(dir, filepath.Base(path))
		var st unix.Stat_t
		if inAny(real, granted) || unix.Stat(real, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			continue
		}
		err = unix.Mount("/dev/null", real, "", unix.MS_BIND, "")
		if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("confine: cover Unix socket %s: %w", real, err)
		}
	}
	return nil
}

// socketPaths are the absolute paths of the sockets a /proc/net/unix listing
// names, each once. Abstract sockets (shown with a leading "@") and unbound
// ones are left out.
func socketPaths(list []byte) []string {
	seen := map[string]bool{}
	var out []string
	lines := strings.Split(string(list), "\n")
	for _, line := range lines[min(1, len(lines)):] {
		// Num RefCount Protocol Flags Type St Inode Path, padded with spaces;
		// the path may hold spaces of its own.
		rest := line
		for range 7 {
			rest = strings.TrimLeft(rest, " ")
			_, rest, _ = strings.Cut(rest, " ")
		}
		path := strings.TrimLeft(rest, " ")
		if !filepath.IsAbs(path) || seen[path] {
			continue
		}
		seen[path] = true
		out = append(out, path)
	}
	return out
}

// realPaths resolves symbolic links in paths, leaving out those that cannot be resolved.
func realPaths(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			out = append(out, real)
		}
	}
	return out
}

// inAny reports whether path is one of dirs or lies below one.
func inAny(path string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(dir string) bool { return within(path, dir) })
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// forwardedSignals are passed on to the command's process group. SIGWINCH
// and terminal-generated signals need no forwarding: the terminal sends
// them to its foreground group, which is the command's.
var forwardedSignals = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// runInit is the init: it sets up the boundary, runs the command and
// returns the exit code to leave with.
func runInit(specJSON string) int {
	// Stripped before anything else, so the command never inherits it.
	os.Unsetenv(initEnv)
	var spec initSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "confine: bad %s: %v\n", initEnv, err)
		return ExitSetupFailed
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "confine: no command to run")
		return ExitSetupFailed
	}
	// Descriptors agenticd's own starter left open without close-on-exec must not
	// reach the command: only stdio and the caller's ExtraFiles pass on.
	if err := unix.CloseRange(uint(3+spec.ExtraFiles), ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		fmt.Fprintf(os.Stderr, "confine: close inherited descriptors: %v\n", err)
		return ExitSetupFailed
	}
	// Capability drops, the fork and the signals below must come from one
	// thread: the capability bounding set belongs to a thread, and so may
	// the Landlock domain (see the signal loop).
	runtime.LockOSThread()
	if spec.Namespaces {
		if err := setupNamespace(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return ExitSetupFailed
		}
		// Where devpts fails, /dev/pts is left empty; Probe reports why (Support.Devpts).
		if _, err := privateTerminals(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return ExitSetupFailed
		}
		if spec.CoverSockets {
			if err := coverSockets(spec.ReadWrite, append(slices.Clone(spec.ReadOnly), spec.ReadWrite...)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return ExitSetupFailed
			}
		}
		if spec.Dir != "" {
			if err := enterDir(spec); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return ExitSetupFailed
			}
		}
		if err := dropCaps(); err != nil {
			fmt.Fprintf(os.Stderr, "confine: drop capabilities: %v\n", err)
			return ExitSetupFailed
		}
	}
	// Before Landlock, which forbids joining the tree's control groups.
	if err := applyLimits(spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return ExitSetupFailed
	}
	if spec.Landlock {
		if err := restrictFiles(spec); err != nil {
			fmt.Fprintf(os.Stderr, "confine: landlock: %v\n", err)
			return ExitSetupFailed
		}
	}
	if !spec.Namespaces {
		// Without a PID namespace there is nothing for an init to hold
		// together: become the command, so that it keeps the pid, process
		// group and terminal its starter knows.
		err := syscall.Exec(spec.Path, os.Args[1:], spec.Env)
		return execFailed(spec.Path, err)
	}

	// Caught before the command exists, so an early signal is queued for
	// it rather than ending the init with its default action.
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, forwardedSignals...)

	files := make([]uintptr, 3+spec.ExtraFiles)
	for i := range files {
		files[i] = uintptr(i)
	}
	pid, err := syscall.ForkExec(spec.Path, os.Args[1:], &syscall.ProcAttr{
		Env:   spec.Env,
		Files: files,
		Sys:   commandAttr(),
	})
	if err != nil {
		return execFailed(spec.Path, err)
	}
	exited := make(chan int, 1)
	go func() { exited <- reapUntil(pid) }()
	// Signals go out from this (locked) thread, the one that started the
	// command: before Landlock ABI 8 each thread gets a Landlock domain of
	// its own, and Landlock's signal scoping lets a thread signal only
	// processes of its own domain (or one nested in it).
	for {
		select {
		case sig := <-signals:
			_ = syscall.Kill(-pid, sig.(syscall.Signal))
		case code := <-exited:
			return code
		}
	}
}

// execFailed reports why the command could not be started and returns the
// exit code that says so.
func execFailed(path string, err error) int {
	fmt.Fprintf(os.Stderr, "confine: start %s: %v\n", path, err)
	if errors.Is(err, syscall.ENOENT) {
		return ExitNotFound
	}
	return ExitCannotExecute
}

// commandAttr puts the command in a process group of its own, in the
// foreground when the init owns a terminal. The command's group, not the
// init's, then gets the terminal's signals (Ctrl-C, SIGWINCH) and may read
// it; signals sent to the init's group are forwarded once, so none arrives
// twice.
func commandAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	for fd := range 3 {
		pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		if err == nil && pgrp == syscall.Getpgrp() {
			attr.Foreground = true
			attr.Ctty = fd
			break
		}
	}
	return attr
}

// reapUntil reaps every child (orphans are reparented to the init) until
// the command itself ends, and returns the command's exit code, 128+n when
// signal n killed it.
func reapUntil(pid int) int {
	for {
		var status syscall.WaitStatus
		got, err := syscall.Wait4(-1, &status, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "confine: wait: %v\n", err)
			return ExitSetupFailed
		}
		if got != pid {
			continue
		}
		switch {
		case status.Exited():
			return status.ExitStatus()
		case status.Signaled():
			return 128 + int(status.Signal())
		}
	}
}

// restrictFiles applies the policy's Landlock ruleset to the init, and so
// to everything it starts. It uses the newest ruleset go-landlock knows,
// downgraded to what the kernel offers; Wrap made sure that is at least
// minLandlockABI. Network rights are handled only for a Network policy, and
// then only TCP connect (see Network); IPC scoping (abstract unix sockets,
// signals) keeps the command from reaching processes outside its domain.
func restrictFiles(spec initSpec) error {
	cfg := landlock.V11
	cfg.HandledAccessNet = 0
	rules := []landlock.Rule{
		landlock.RWFiles("/dev/null", "/dev/full").IgnoreIfMissing(),
		landlock.ROFiles("/dev/zero", "/dev/random", "/dev/urandom").IgnoreIfMissing(),
	}
	if spec.Network != nil {
		cfg.HandledAccessNet = llsys.AccessNetConnectTCP
		for _, port := range spec.Network.AllowTCPPorts {
			rules = append(rules, landlock.ConnectTCP(port))
		}
	}
	if spec.Namespaces {
		// The namespace's own /proc: only the command's processes.
		rules = append(rules, landlock.RODirs("/proc"))
	}
	if spec.Pty {
		rules = append(rules,
			landlock.RWFiles("/dev/ptmx", "/dev/tty").WithIoctlDev().IgnoreIfMissing(),
			landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing())
	}
	for _, path := range spec.ReadOnly {
		if isDir(path) {
			rules = append(rules, landlock.RODirs(path))
		} else {
			rules = append(rules, landlock.ROFiles(path))
		}
	}
	for _, path := range spec.ReadWrite {
		if isDir(path) {
			rules = append(rules, landlock.RWDirs(path).WithRefer().WithResolveUnix())
		} else {
			// Directory rights (refer among them) are invalid on a file.
			rules = append(rules, landlock.RWFiles(path))
		}
	}
	return cfg.BestEffort().Restrict(rules...)
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// dropCaps empties this thread's capability bounding and ambient sets, so
// that the command holds no capabilities after exec: not as uid 0 in the
// namespace (agenticd run as root), not from the init's ambient
// capabilities, not from a file's capabilities.
func dropCaps() error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("bounding capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("ambient capabilities: %w", err)
	}
	// Inheritable capabilities pass to a uid-0 command at exec whatever
	// the bounding set says; raising ambient ones put two there.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear inheritable capabilities: %w", err)
	}
	return nil
}

// lastCap is the highest capability number this kernel knows.
func lastCap() (int, error) {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	var last int
	if _, err := fmt.Sscan(string(bytes.TrimSpace(data)), &last); err != nil {
		return 0, fmt.Errorf("parse cap_last_cap: %w", err)
	}
	return last, nil
}

// lastOfEach keeps the last value of each variable, as exec.Cmd does with its Env: the
// command is started with the raw list, where the first of two would win.
func lastOfEach(env []string) []string {
	seen := make(map[string]bool, len(env))
	out := make([]string, 0, len(env))
	for i := len(env) - 1; i >= 0; i-- {
		k, _, _ := strings.Cut(env[i], "=")
		if !seen[k] {
			seen[k] = true
			out = append(out, env[i])
		}
	}
	slices.Reverse(out)
	return out
}
