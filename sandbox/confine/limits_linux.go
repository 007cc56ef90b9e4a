package confine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// cgroupV1Root is where the cgroup v1 hierarchies are mounted, one directory per
// controller.
const cgroupV1Root = "/sys/fs/cgroup"

// Group is a control group of its own for one confined tree: a directory in each
// cgroup v1 hierarchy (pids, memory) where this machine lets agenticd create one,
// below agenticd's own group. It bounds the whole tree where resource limits bound
// each process or do not count (root). Set it as Policy.Group; Remove it once the
// command has exited (the init's exit, as PID 1, ends every process of the tree).
//
// Only cgroup v1 is used: a cgroup v2 subtree would need a delegation agenticd
// cannot test here, and joining it from the init would need cgroup namespaces.
type Group struct {
	dirs []string
}

// NewGroup creates the control groups that bound l's processes and memory, nil (and no
// error) when this machine offers none agenticd may write or l bounds neither.
func NewGroup(l Limits) (*Group, error) {
	if err := l.Check(); err != nil {
		return nil, err
	}
	s := Probe()
	g := &Group{}
	add := func(parent, file string, value int64) error {
		if value <= 0 || parent == "" {
			return nil
		}
		dir, err := os.MkdirTemp(parent, "agenticd-tree-")
		if err != nil {
			return fmt.Errorf("create control group: %w", err)
		}
		g.dirs = append(g.dirs, dir)
		if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(value, 10)), 0); err != nil {
			return fmt.Errorf("set %s of control group %s: %w", file, dir, err)
		}
		return nil
	}
	if err := add(s.PidsCgroup, "pids.max", int64(l.Processes)); err != nil {
		g.Remove()
		return nil, err
	}
	if err := add(s.MemoryCgroup, "memory.limit_in_bytes", l.Memory); err != nil {
		g.Remove()
		return nil, err
	}
	if len(g.dirs) == 0 {
		return nil, nil
	}
	return g, nil
}

// Remove deletes the group's directories; a nil Group does nothing. It must follow the
// command's exit: a group that still holds a process stays (EBUSY).
func (g *Group) Remove() {
	if g == nil {
		return
	}
	for _, dir := range g.dirs {
		_ = unix.Rmdir(dir)
	}
}

func (g *Group) paths() []string {
	if g == nil {
		return nil
	}
	return g.dirs
}

// probeGroups finds, for the pids and memory controllers, agenticd's own cgroup v1
// directory if agenticd may create groups in it (it tries once), else "".
func probeGroups() (pids, memory string) {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", ""
	}
	return writableGroup(own, "pids"), writableGroup(own, "memory")
}

// writableGroup is the directory of this process's group in controller's v1
// hierarchy (from own, /proc/self/cgroup) when a group can be created in it, else "".
func writableGroup(own []byte, controller string) string {
	sc := bufio.NewScanner(bytes.NewReader(own))
	for sc.Scan() {
		// hierarchy-ID:controller-list:path; cgroup v2's line has an empty list.
		fields := strings.SplitN(sc.Text(), ":", 3)
		if len(fields) != 3 || !slices.Contains(strings.Split(fields[1], ","), controller) {
			continue
		}
		dir := filepath.Join(cgroupV1Root, controller, fields[2])
		var fs unix.Statfs_t
		if unix.Statfs(dir, &fs) != nil || fs.Type != unix.CGROUP_SUPER_MAGIC {
			return ""
		}
		probe, err := os.MkdirTemp(dir, "agenticd-probe-")
		if err != nil {
			return ""
		}
		_ = unix.Rmdir(probe)
		return dir
	}
	return ""
}

// applyLimits runs in the init, on the thread that starts the command and before the
// boundary forbids writing to /sys: it joins the tree's control groups and sets the
// resource limits the command inherits. RLIMIT_NPROC is set only in a user namespace
// of the tree's own, where the kernel counts it per tree; elsewhere it would count
// every process of the user.
func applyLimits(spec initSpec) error {
	l := spec.Limits
	for _, dir := range l.Groups {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("0"), 0); err != nil {
			return fmt.Errorf("confine: join control group %s: %w", dir, err)
		}
	}
	if l.Processes > 0 && spec.Namespaces {
		if err := lowerLimit(unix.RLIMIT_NPROC, uint64(l.Processes)); err != nil {
			return fmt.Errorf("confine: limit processes: %w", err)
		}
	}
	if l.Processes > 0 {
		// The init's threads count with the tree's, and a thread the Go runtime cannot
		// start is fatal: with the tree at its limit, a collection (which may start
		// one) would end the init, and the tree with it. The init allocates next to
		// nothing from here on.
		debug.SetGCPercent(-1)
	}
	if l.Memory > 0 {
		if err := lowerLimit(unix.RLIMIT_DATA, uint64(l.Memory)); err != nil {
			return fmt.Errorf("confine: limit memory: %w", err)
		}
	}
	if l.FileSize > 0 {
		if err := lowerLimit(unix.RLIMIT_FSIZE, uint64(l.FileSize)); err != nil {
			return fmt.Errorf("confine: limit file size: %w", err)
		}
	}
	if l.Nice > 0 {
		// Linux keeps the nice value per thread: this one starts the command.
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, l.Nice); err != nil {
			return fmt.Errorf("confine: set nice %d: %w", l.Nice, err)
		}
	}
	return nil
}

// lowerLimit sets both the soft and the hard limit of resource to value, so that the
// command cannot raise it, or keeps them where they already are lower.
func lowerLimit(resource int, value uint64) error {
	var cur unix.Rlimit
	if err := unix.Getrlimit(resource, &cur); err != nil {
		return err
	}
	lim := unix.Rlimit{Cur: min(cur.Cur, value), Max: min(cur.Max, value)}
	if err := unix.Setrlimit(resource, &lim); err != nil {
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("%w (the limit was %d/%d)", err, cur.Cur, cur.Max)
		}
		return err
	}
	return nil
}
