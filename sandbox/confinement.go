package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agenticd/agenticd/sandbox/confine"
)

// ConfinementMode says whether the processes started for sessions (agents, terminals,
// commands) run under the operating system's boundary (sandbox/confine).
type ConfinementMode string

const (
	// ConfineOff starts processes unconfined: only the permission policy and the file
	// tools' path checks stand between an agent and the machine.
	ConfineOff ConfinementMode = "off"
	// ConfineAuto confines as far as this kernel allows and says loudly what it cannot.
	ConfineAuto ConfinementMode = "auto"
	// ConfineOn requires the whole boundary: a process that cannot be confined is not
	// started.
	ConfineOn ConfinementMode = "on"
)

// off reports whether processes start unconfined: Options' zero value is off, unlike a
// config file's empty setting, which ParseConfinementMode reads as auto.
func (m ConfinementMode) off() bool { return m == ConfineOff || m == "" }

// ParseConfinementMode reads a configured mode; empty is ConfineAuto.
func ParseConfinementMode(s string) (ConfinementMode, error) {
	switch m := ConfinementMode(s); m {
	case "":
		return ConfineAuto, nil
	case ConfineOff, ConfineAuto, ConfineOn:
		return m, nil
	}
	return "", fmt.Errorf("confinement %q: use on, off or auto (on where the kernel supports it)", s)
}

// systemReadPaths are what every confined process may read and execute: the system's
// programs, libraries and configuration. agenticd's own files are carved out of them.
var systemReadPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// Limits bound what one confined process tree may take (see confine.Limits).
type Limits = confine.Limits

// Network is an egress policy for a confined process tree (see confine.Network).
type Network = confine.Network

// ProcessPaths are the paths a confined process may use beyond its workspace, its
// private temp dir and the system: an agent's installation and state directories; and
// the bounds of an agent's own tree.
type ProcessPaths struct {
	Read  []string
	Write []string
	// Limits replace Options.Limits for this tree when not nil.
	Limits *Limits
	// Network, when not nil, restricts the TCP ports the tree may connect to.
	Network *Network
}

// ErrConfinement: a process could not be started under the boundary the configuration
// asks for.
var ErrConfinement = errors.New("cannot confine the process")

// ConfinementState describes the boundary processes run under, for logs and AgentInfo:
// terminals and commands, and agents without limits or a network policy of their own.
func (r *Roots) ConfinementState() string {
	return r.ProcessConfinement(ProcessPaths{})
}

// ProcessConfinement describes the boundary a process confined with extra runs under:
// what this machine enforces, the tree's limits and how each is enforced (or that it is
// not), and the network policy.
func (r *Roots) ProcessConfinement(extra ProcessPaths) string {
	if r.opts.Confinement.off() {
		return "off: processes agents start are not confined (confinement: off)"
	}
	support := confine.Probe()
	bounds := support.Describe(r.opts.treeLimits(extra))
	if extra.Network != nil {
		if support.RestrictsNetwork() {
			bounds += "; " + extra.Network.String()
		} else {
			bounds += fmt.Sprintf("; network NOT RESTRICTED: the policy needs Landlock ABI 4 (Linux 6.7), this kernel has %d", support.LandlockABI)
		}
	} else {
		bounds += "; network open"
	}
	if missing := support.Missing(); len(missing) > 0 {
		return fmt.Sprintf("partial (%s): missing %s; %s", support, strings.Join(missing, "; "), bounds)
	}
	return "on: " + support.String() + "; " + bounds
}

// treeLimits are the limits of a tree confined with extra.
func (o Options) treeLimits(extra ProcessPaths) Limits {
	if extra.Limits != nil {
		return *extra.Limits
	}
	return o.Limits
}

// ConfinesFiles reports whether the processes started for sessions run with their files
// bounded (confinement not off, and Landlock available): an agent's own sandbox, which
// needs to mount, cannot work inside that boundary and is not needed.
func (r *Roots) ConfinesFiles() bool {
	if r.opts.Confinement.off() {
		return false
	}
	return confine.Probe().ConfinesFiles()
}

// UnenforcedLimits lists, as sentences, the limits of trees without their own
// (Options.Limits) that this machine cannot enforce; empty when confinement is off.
func (r *Roots) UnenforcedLimits() []string {
	if r.opts.Confinement.off() {
		return nil
	}
	return confine.Probe().Unenforced(r.opts.Limits)
}

// ConfinementMissing lists what this kernel cannot enforce of the configured boundary;
// empty when confinement is off or complete.
func (r *Roots) ConfinementMissing() []string {
	if r.opts.Confinement.off() {
		return nil
	}
	return confine.Probe().Missing()
}

// Confine rewrites cmd, not yet started, to run under the boundary for workspace: it
// may write only the workspace, a private temp dir (TMPDIR) and extra.Write; read the
// system, the workspace, extra.Read and the command's own installation; and never
// agenticd's own files. Whatever it starts ends with it. Its tree is bounded by
// extra.Limits, or Options.Limits, and extra.Network. The returned release removes the
// temp dir and the tree's control groups once the process has exited; it is a no-op
// when confinement is off.
func (r *Roots) Confine(cmd *exec.Cmd, workspace string, extra ProcessPaths) (release func(), err error) {
	return r.opts.confine(cmd, workspace, extra, true)
}

// confine is Confine; installs says whether the command's own installation (derived from
// its path, arguments and "#!" line) is readable. That holds for agents, whose command
// is the operator's config, and never for terminals, whose command, arguments and PATH
// come from a request: there they would open any file to reading.
func (o Options) confine(cmd *exec.Cmd, workspace string, extra ProcessPaths, installs bool) (release func(), err error) {
	mode := o.Confinement
	if mode.off() {
		return func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "agenticd-tmp-")
	if err != nil {
		return nil, fmt.Errorf("%w: private temp dir: %v", ErrConfinement, err)
	}
	release = func() { _ = os.RemoveAll(tmp) }
	var install []string
	if installs {
		install = installPaths(cmd)
	}
	limits := o.treeLimits(extra)
	group, err := confine.NewGroup(limits)
	if err != nil {
		release()
		return nil, fmt.Errorf("%w: %v", ErrConfinement, err)
	}
	release = func() {
		_ = os.RemoveAll(tmp)
		group.Remove()
	}
	policy := confine.Policy{
		ReadOnly:   o.readPaths(append(install, extra.Read...)),
		ReadWrite:  append([]string{workspace, tmp}, o.allowed(existing(extra.Write))...),
		Pty:        true,
		BestEffort: mode == ConfineAuto,
		Limits:     limits,
		Group:      group,
		Network:    extra.Network,
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = WithEnv(env, map[string]string{"TMPDIR": tmp, "TMP": tmp, "TEMP": tmp, "CLAUDE_CODE_TMPDIR": tmp})
	if _, err := policy.Wrap(cmd); err != nil {
		release()
		return nil, fmt.Errorf("%w: %v", ErrConfinement, err)
	}
	return release, nil
}

// readPaths are the system's read paths plus extra, with agenticd's own files carved
// out: a directory holding one is replaced by its other entries.
func (o Options) readPaths(extra []string) []string {
	var out []string
	for _, p := range append(existing(systemReadPaths), o.allowed(existing(extra))...) {
		out = append(out, o.carve(p)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// carve returns dir whole when no excluded path lies inside it, else its entries minus
// the excluded ones, carving further down where an excluded path lies deeper.
func (o Options) carve(dir string) []string {
	if isExcluded(o.Excluded, dir) {
		return nil
	}
	if _, holds := holdsExcluded(o.Excluded, dir); !holds {
		return []string{dir}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			continue // Landlock would follow it, perhaps to what is carved out
		}
		out = append(out, o.carve(filepath.Join(dir, e.Name()))...)
	}
	return out
}

// allowed drops the paths that are or lie inside agenticd's own files.
func (o Options) allowed(paths []string) []string {
	return slices.DeleteFunc(paths, func(p string) bool { return isExcluded(o.Excluded, p) })
}

// installPaths are what the command needs to run: the directory of its real file, of the
// interpreter its "#!" line names (node under nvm, say) and of any absolute file among
// its arguments (a script run by an interpreter), widened to the node_modules that holds
// it, where its dependencies are.
func installPaths(cmd *exec.Cmd) []string {
	var out []string
	add := func(p string) {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return
		}
		if fi, err := os.Stat(real); err != nil || fi.IsDir() {
			return
		}
		dir := filepath.Dir(real)
		if i := strings.Index(dir+"/", "/node_modules/"); i >= 0 {
			dir = dir[:i+len("/node_modules")]
		}
		out = append(out, dir)
	}
	add(cmd.Path)
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	if interp := interpreter(cmd.Path, envValue(env, "PATH")); interp != "" {
		add(interp)
	}
	for _, a := range cmd.Args[1:] {
		if filepath.IsAbs(a) {
			add(a)
		}
	}
	return out
}

// InstallPaths are the directories a command from agenticd's configuration needs to read
// to run, found as Confine finds an agent's (see installPaths), for a command another
// confined process starts: an MCP server an agent runs. command is looked up on PATH.
func InstallPaths(command string, args []string) []string {
	path, err := exec.LookPath(command)
	if err != nil {
		return nil
	}
	return installPaths(&exec.Cmd{Path: path, Args: append([]string{command}, args...)})
}

// existing keeps the paths that exist, resolved and cleaned; missing ones are left out
// (an agent's state directory it has not created yet).
func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err == nil && filepath.IsAbs(real) {
			out = append(out, filepath.Clean(real))
		}
	}
	return out
}

// AgentEnv is the environment of an agent's own process: agenticd's, without agenticd's
// own variables (AGENTICD_*) and those Options.HiddenEnv names (every agent's API key)
// except the ones in keep (the keys this agent itself uses), then with set (the agent's
// configured env, which may give it any of them) added. A confined agent cannot read
// agenticd's environment through /proc; this keeps agenticd from handing it over.
func (r *Roots) AgentEnv(set map[string]string, keep []string) []string {
	hidden := slices.DeleteFunc(slices.Clone(r.opts.HiddenEnv), func(name string) bool { return slices.Contains(keep, name) })
	return WithEnv(withoutSecrets(os.Environ(), hidden), set)
}

// WithEnv sets variables in an environment list, replacing earlier values.
func WithEnv(env []string, set map[string]string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, ok := set[k]
		return ok
	})
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}

// interpreter is the program a script's "#!" line runs, with "/usr/bin/env X" looked up
// on path; "" for a binary or an interpreter that cannot be found.
func interpreter(script, path string) string {
	f, err := os.Open(script)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := f.Read(head)
	line, _, _ := strings.Cut(string(head[:n]), "\n")
	rest, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return ""
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) != "env" {
		return fields[0]
	}
	for _, f := range fields[1:] {
		if strings.HasPrefix(f, "-") || strings.Contains(f, "=") {
			continue // env's options (-S) and assignments
		}
		if p, err := lookPath(f, path); err == nil {
			return p
		}
		return ""
	}
	return ""
}
