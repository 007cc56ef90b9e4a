package confine

import (
	"fmt"
	"strings"
)

// Limits bound what one confined tree (the command and everything it starts) may take,
// so that one session cannot starve the others. A zero field leaves that resource
// unbounded. Wrap enforces them with resource limits the init sets before it starts
// the command; a Group (NewGroup) bounds the whole tree where those fall short.
type Limits struct {
	// Processes caps the tree's tasks (processes and their threads, the init's
	// included) at once: a fork beyond it fails with EAGAIN. Enforced by RLIMIT_NPROC,
	// which the kernel counts per user namespace (so per tree) but never for root, and
	// by a Group's pids controller, which binds root too.
	Processes int
	// Memory caps each process's data (RLIMIT_DATA: heap and private writable
	// mappings, so an allocation beyond it fails with ENOMEM), and the whole tree's
	// memory in a Group's memory controller. RLIMIT_AS is not used: node and V8 reserve
	// far more address space than they use.
	Memory int64
	// FileSize caps the size of a file the tree writes (RLIMIT_FSIZE): a write beyond
	// it fails with EFBIG and raises SIGXFSZ.
	FileSize int64
	// Nice lowers the tree's CPU priority, 0 (unchanged) to 19 (lowest).
	Nice int
}

// DefaultLimits fit real agents (node-based agents, their shells, git, compilers): node
// alone runs a dozen threads and V8's heap stays below 4 GiB, a parallel build runs
// hundreds of tasks, and few files an agent writes pass 1 GiB.
var DefaultLimits = Limits{Processes: 4096, Memory: 4 << 30, FileSize: 1 << 30}

// Check says what is wrong with l, nil when nothing.
func (l Limits) Check() error {
	switch {
	case l.Processes < 0:
		return fmt.Errorf("%w: process limit %d is negative", ErrInvalidPolicy, l.Processes)
	case l.Memory < 0:
		return fmt.Errorf("%w: memory limit %d is negative", ErrInvalidPolicy, l.Memory)
	case l.FileSize < 0:
		return fmt.Errorf("%w: file size limit %d is negative", ErrInvalidPolicy, l.FileSize)
	case l.Nice < 0 || l.Nice > 19:
		return fmt.Errorf("%w: nice %d is outside 0 to 19", ErrInvalidPolicy, l.Nice)
	}
	return nil
}

// limitSpec is what the init applies before it starts the command.
type limitSpec struct {
	Limits
	// Groups are the cgroup v1 directories the init joins (writes itself to their
	// cgroup.procs) so that the command starts in them.
	Groups []string `json:",omitempty"`
}

// Describe says which of l this machine enforces on a tree with a Group (NewGroup) and
// how, for logs and AgentInfo. Limits it cannot enforce are named as such.
func (s Support) Describe(l Limits) string {
	var parts []string
	if l.Processes > 0 {
		var by []string
		if s.PidsCgroup != "" {
			by = append(by, "pids cgroup")
		}
		if s.Namespaces == nil && !s.Root {
			by = append(by, "RLIMIT_NPROC in the tree's user namespace")
		}
		if len(by) == 0 {
			parts = append(parts, s.Unenforced(l)...)
		} else {
			parts = append(parts, fmt.Sprintf("processes: %d per tree (%s)", l.Processes, strings.Join(by, ", ")))
		}
	}
	if l.Memory > 0 {
		tree := "not per tree: no memory cgroup agenticd may write"
		if s.MemoryCgroup != "" {
			tree = "and per tree (memory cgroup)"
		}
		parts = append(parts, fmt.Sprintf("memory: %s per process (RLIMIT_DATA) %s", FormatBytes(l.Memory), tree))
	}
	if l.FileSize > 0 {
		parts = append(parts, fmt.Sprintf("file size: %s (RLIMIT_FSIZE)", FormatBytes(l.FileSize)))
	}
	if l.Nice > 0 {
		parts = append(parts, fmt.Sprintf("nice %d", l.Nice))
	}
	if len(parts) == 0 {
		return "limits: none"
	}
	return "limits: " + strings.Join(parts, "; ")
}

// Unenforced lists, as sentences, the limits of l this machine cannot enforce at all.
func (s Support) Unenforced(l Limits) []string {
	if l.Processes <= 0 || s.PidsCgroup != "" || (s.Namespaces == nil && !s.Root) {
		return nil
	}
	why := "agenticd runs as root, for whom RLIMIT_NPROC does not count, and has no pids cgroup it may write (run it as an ordinary user, or give it a cgroup v1 pids hierarchy)"
	if !s.Root {
		why = "without a user namespace per tree, RLIMIT_NPROC would count every process of agenticd's user"
	}
	return []string{fmt.Sprintf("processes: %d per tree NOT ENFORCED: %s", l.Processes, why)}
}

// FormatBytes writes n in the largest binary unit that divides it (KiB to TiB).
func FormatBytes(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
