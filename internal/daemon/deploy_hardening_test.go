//go:build linux

package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agenticd/agenticd/internal/unprivileged"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// The systemd unit's hardening must leave agenticd's confinement whole. No systemd runs
// where the tests do, so each directive of deploy/agenticd.service is reproduced the way
// systemd applies it (a mount namespace set up as root, then the service's user namespace,
// uid, no_new_privs and capability sets), and the confinement probe runs under it as an
// ordinary user: it must report the full boundary, and a confined command must run.
// Every directive in the unit needs an entry in hardeningDirectives, so a new one cannot
// slip in untested.

// hardeningHelperEnv turns the test binary into the helper that runs inside the
// reproduction: "userns" starts its arguments in the service's user namespace, "probe"
// prints what confinement reports (hardeningReport) as JSON.
const hardeningHelperEnv = "AGENTICD_HARDENING_HELPER"

// hardeningIDsEnv is "uid:gid" of the ordinary user, mapped in the service's user namespace.
const hardeningIDsEnv = "AGENTICD_HARDENING_IDS"

func init() {
	switch os.Getenv(hardeningHelperEnv) {
	case "userns":
		os.Exit(hardeningUserNamespace(os.Args[1:]))
	case "probe":
		os.Exit(hardeningProbe())
	}
}

// hardeningReport is what the helper saw as the service's process.
type hardeningReport struct {
	UID         int
	NoNewPrivs  string // /proc/self/status
	CapBnd      string
	Confinement string // confine.Support's summary
	Missing     []string
	Devpts      string
	// Output and Err of a confined command that writes its workspace and reads its /proc.
	Output, Err string
}

// hardeningUserNamespace runs args in a new user namespace that maps root and the
// ordinary user to themselves, as PrivateUsers=yes does, as root in it (setpriv then
// switches to the user).
func hardeningUserNamespace(args []string) int {
	uid, gid, _ := strings.Cut(os.Getenv(hardeningIDsEnv), ":")
	u, _ := strconv.Atoi(uid)
	g, _ := strconv.Atoi(gid)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, hardeningHelperEnv+"=")
	}), hardeningHelperEnv+"=probe")
	uids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}
	gids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}
	if u != 0 {
		uids = append(uids, syscall.SysProcIDMap{ContainerID: u, HostID: u, Size: 1})
	}
	if g != 0 {
		gids = append(gids, syscall.SysProcIDMap{ContainerID: g, HostID: g, Size: 1})
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER,
		UidMappings:                uids,
		GidMappings:                gids,
		GidMappingsEnableSetgroups: true,
	}
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hardening helper: user namespace:", err)
		return 99
	}
	return 0
}

// hardeningProbe is the service's process: it reports confinement as agenticd would at
// start, and runs one command confined, as agenticd runs agents.
func hardeningProbe() int {
	confine.MaybeRunInit()
	support := confine.Probe()
	r := hardeningReport{UID: os.Getuid(), Confinement: support.String(), Missing: support.Missing()}
	if support.Devpts != nil {
		r.Devpts = support.Devpts.Error()
	}
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.SplitSeq(string(status), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && k == "NoNewPrivs" {
				r.NoNewPrivs = strings.TrimSpace(v)
			} else if ok && k == "CapBnd" {
				r.CapBnd = strings.TrimSpace(v)
			}
		}
	}
	ws, err := os.MkdirTemp("", "agenticd-hardening-ws-")
	if err != nil {
		r.Err = "workspace: " + err.Error()
	} else {
		defer os.RemoveAll(ws)
		cmd := exec.Command("/bin/sh", "-c", `echo confined > "$1/f" && cat "$1/f" && tr '\0' ' ' < /proc/1/cmdline`, "sh", ws)
		var ro []string
		for _, p := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc"} {
			if _, err := os.Stat(p); err == nil {
				ro = append(ro, p)
			}
		}
		if _, err := (confine.Policy{ReadOnly: ro, ReadWrite: []string{ws}}).Wrap(cmd); err != nil {
			r.Err = "wrap: " + err.Error()
		} else {
			out, err := cmd.CombinedOutput()
			r.Output = string(out)
			if err != nil {
				r.Err = err.Error()
			}
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 1
	}
	return 0
}

// unitDirective is one Key=Value line of a unit's [Service] section.
type unitDirective struct {
	Key, Value string
	Line       int
}

func (d unitDirective) String() string { return fmt.Sprintf("%s=%s (line %d)", d.Key, d.Value, d.Line) }

// parseServiceSection reads the [Service] directives of a systemd unit (no line
// continuations: the shipped unit has none, and a continued line fails to parse here).
func parseServiceSection(data []byte) ([]unitDirective, error) {
	var out []unitDirective
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
			continue
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line
			continue
		case strings.HasSuffix(line, `\`):
			return nil, fmt.Errorf("line %d: continued lines are not parsed here: write the directive on one line", n)
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not Key=Value", n, line)
		}
		if section == "[Service]" {
			out = append(out, unitDirective{Key: strings.TrimSpace(key), Value: strings.TrimSpace(value), Line: n})
		}
	}
	return out, sc.Err()
}

// reproduction is how a set of directives is reproduced without systemd: a shell script
// run as root in new namespaces (unshare flags), mounts first, then the read-only flips
// (systemd's order), then the service's user namespace and setpriv's switch to the user.
type reproduction struct {
	unshare  []string // beyond --mount
	procfs   []string // mounting /proc anew comes before what is mounted on it
	mounts   []string
	readOnly []string
	strict   bool     // ProtectSystem=strict: everything read-only but the API file systems
	exclude  []string // kept out of strict's flip: ReadWritePaths, state dirs, ProtectHome's
	setpriv  []string
	userns   bool
	umask    string
	notes    []string // what is checked statically or cannot be reproduced here
}

// changes reports whether the reproduction applies anything to the service's process.
func (r reproduction) changes() bool {
	return len(r.unshare)+len(r.procfs)+len(r.mounts)+len(r.readOnly)+len(r.setpriv)+len(r.exclude) > 0 ||
		r.strict || r.userns || r.umask != ""
}

// hardeningDirective reproduces one directive, or checks it statically, or says why it
// does not touch confinement (in notes).
type hardeningDirective func(value string, r *reproduction) error

// inaccessible and readOnly are script lines calling the shell functions of the same
// names (reproduction.script).
func inaccessible(paths ...string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, "inaccessible "+p)
	}
	return out
}

func readOnly(paths ...string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, "read_only "+p)
	}
	return out
}

func noEffect(why string) hardeningDirective {
	return func(value string, r *reproduction) error {
		r.notes = append(r.notes, why)
		return nil
	}
}

func onlyValue(want string, f hardeningDirective) hardeningDirective {
	return func(value string, r *reproduction) error {
		if value != want {
			return fmt.Errorf("only %q is reproduced: add a reproduction for %q", want, value)
		}
		return f(value, r)
	}
}

// protectKernelTunablesProc is what systemd's ProtectKernelTunables=yes covers in /proc.
var (
	protectKernelTunablesRO = []string{"/proc/acpi", "/proc/apm", "/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq",
		"/proc/latency_stats", "/proc/mtrr", "/proc/scsi", "/proc/sys", "/proc/sysrq-trigger", "/proc/timer_stats"}
	protectKernelTunablesHidden = []string{"/proc/kallsyms", "/proc/kcore"}
)

// confineNamespaces are the namespaces confine.Policy.Wrap creates (sandbox/confine).
var confineNamespaces = []string{"user", "pid", "mnt"}

// confineSyscalls are the system calls confine's init and probe make beyond what any Go
// program does, each with the systemd syscall groups (seccomp-util.c) that hold it.
var confineSyscalls = map[string][]string{
	"clone":                   {"@process", "@system-service"},
	"clone3":                  {"@process", "@system-service"},
	"unshare":                 {"@process", "@system-service"},
	"prctl":                   {"@process", "@system-service"}, // capability bounding and ambient sets
	"capget":                  {"@process", "@system-service", "@default"},
	"capset":                  {"@system-service"},
	"close_range":             {"@basic-io", "@system-service"},
	"mount":                   {"@mount"},
	"landlock_create_ruleset": {"@sandbox"},
	"landlock_add_rule":       {"@sandbox"},
	"landlock_restrict_self":  {"@sandbox"},
}

var hardeningDirectives = map[string]hardeningDirective{
	// Not sandboxing: how systemd starts, stops and feeds the service.
	"Type":            noEffect("Type=: how systemd waits for the start"),
	"ExecStart":       noEffect("ExecStart=: the helper is put where it points"),
	"Environment":     noEffect("Environment=: variables"),
	"EnvironmentFile": noEffect("EnvironmentFile=: variables"),
	"KillMode":        noEffect("KillMode=: how the service stops"),
	"TimeoutStopSec":  noEffect("TimeoutStopSec=: how the service stops"),
	"Restart":         noEffect("Restart=: how the service restarts"),
	"RestartSec":      noEffect("RestartSec=: how the service restarts"),
	"StateDirectoryMode": noEffect(
		"StateDirectoryMode=: the state dirs' mode"),
	"Delegate":  noEffect("Delegate=: systemd hands the service its cgroup subtree; nothing to reproduce without systemd (and this machine has cgroup v1 only)"),
	"RemoveIPC": noEffect("RemoveIPC=: System V IPC objects removed at stop; confinement uses none"),

	// Who the service runs as: the ordinary user tests run agenticd as.
	"User":  func(string, *reproduction) error { return nil }, // setpriv --reuid, always
	"Group": func(string, *reproduction) error { return nil }, // setpriv --regid, always
	"UMask": func(value string, r *reproduction) error {
		if _, err := strconv.ParseUint(value, 8, 32); err != nil {
			return fmt.Errorf("not an octal mode: %v", err)
		}
		r.umask = value
		return nil
	},
	"NoNewPrivileges": onlyValue("yes", func(_ string, r *reproduction) error {
		r.setpriv = append(r.setpriv, "--no-new-privs")
		return nil
	}),
	"CapabilityBoundingSet": onlyValue("", func(_ string, r *reproduction) error {
		r.setpriv = append(r.setpriv, "--bounding-set", "-all")
		return nil
	}),
	"AmbientCapabilities": onlyValue("", func(_ string, r *reproduction) error {
		r.setpriv = append(r.setpriv, "--inh-caps", "-all", "--ambient-caps", "-all")
		return nil
	}),
	"PrivateUsers": onlyValue("yes", func(_ string, r *reproduction) error {
		r.userns = true
		return nil
	}),

	// The file system.
	"ProtectSystem": onlyValue("strict", func(_ string, r *reproduction) error {
		r.strict = true
		return nil
	}),
	"ReadWritePaths": func(value string, r *reproduction) error {
		for _, p := range strings.Fields(value) {
			p = strings.TrimPrefix(p, "-")
			if _, err := os.Stat(p); err != nil {
				// systemd refuses to start without it; here it is left out.
				r.notes = append(r.notes, fmt.Sprintf("ReadWritePaths=%s: absent here, left out", p))
				continue
			}
			r.exclude = append(r.exclude, p)
		}
		return nil
	},
	"ReadOnlyPaths": func(value string, r *reproduction) error {
		for _, p := range strings.Fields(value) {
			r.readOnly = append(r.readOnly, "ro_tree "+strings.TrimPrefix(p, "-"))
		}
		return nil
	},
	"StateDirectory": func(value string, r *reproduction) error {
		for _, d := range strings.Fields(value) {
			r.exclude = append(r.exclude, "/var/lib/"+d)
		}
		return nil
	},
	"ProtectHome": onlyValue("yes", func(_ string, r *reproduction) error {
		r.mounts = append(r.mounts, inaccessible("/home", "/run/user", "/root")...)
		r.exclude = append(r.exclude, "/home", "/run/user", "/root")
		return nil
	}),
	"PrivateTmp": onlyValue("yes", func(_ string, r *reproduction) error {
		r.mounts = append(r.mounts,
			"mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp",
			"mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /var/tmp")
		r.exclude = append(r.exclude, "/tmp", "/var/tmp")
		return nil
	}),
	"PrivateDevices": onlyValue("yes", func(_ string, r *reproduction) error {
		r.mounts = append(r.mounts, "private_dev")
		r.notes = append(r.notes, "PrivateDevices=: the device cgroup (DevicePolicy=closed) and its @raw-io filter are not reproduced")
		return nil
	}),
	"PrivateMounts": onlyValue("yes", noEffect("PrivateMounts=: the reproduction always runs in a mount namespace of its own, propagation slave")),
	"PrivateIPC": onlyValue("yes", func(_ string, r *reproduction) error {
		r.unshare = append(r.unshare, "--ipc")
		return nil
	}),
	"ProtectProc": onlyValue("invisible", func(_ string, r *reproduction) error {
		r.procfs = append(r.procfs, "mount -t proc -o nosuid,nodev,noexec,hidepid=invisible proc /proc")
		return nil
	}),
	"ProtectKernelTunables": onlyValue("yes", func(_ string, r *reproduction) error {
		r.mounts = append(r.mounts, readOnly(protectKernelTunablesRO...)...)
		r.mounts = append(r.mounts, inaccessible(protectKernelTunablesHidden...)...)
		r.readOnly = append(r.readOnly, "ro_tree /sys /sys/fs/cgroup")
		return nil
	}),
	"ProtectKernelModules": onlyValue("yes", func(_ string, r *reproduction) error {
		r.mounts = append(r.mounts, inaccessible("/usr/lib/modules")...)
		r.notes = append(r.notes, "ProtectKernelModules=: its @module filter is not reproduced")
		return nil
	}),
	"ProtectKernelLogs": onlyValue("yes", func(_ string, r *reproduction) error {
		r.mounts = append(r.mounts, inaccessible("/proc/kmsg", "/dev/kmsg")...)
		r.notes = append(r.notes, "ProtectKernelLogs=: its syslog(2) filter is not reproduced")
		return nil
	}),
	"ProtectControlGroups": func(value string, r *reproduction) error {
		switch value {
		case "yes":
			r.readOnly = append(r.readOnly, "ro_tree /sys/fs/cgroup")
		case "private":
			r.unshare = append(r.unshare, "--cgroup")
			r.mounts = append(r.mounts, "mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup")
		default:
			return fmt.Errorf("only yes and private are reproduced")
		}
		return nil
	},
	"ProtectHostname": func(value string, r *reproduction) error {
		switch value {
		case "yes":
			r.unshare = append(r.unshare, "--uts")
			r.mounts = append(r.mounts, readOnly("/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname")...)
		case "private":
			r.unshare = append(r.unshare, "--uts")
		default:
			return fmt.Errorf("only yes and private are reproduced")
		}
		return nil
	},

	// seccomp filters: no seccomp tooling here, so these are checked against what
	// confinement needs instead of being applied.
	"RestrictNamespaces": func(value string, r *reproduction) error {
		allowed := func(ns string) bool {
			switch {
			case value == "no" || value == "false":
				return true
			case value == "yes" || value == "true":
				return false
			case strings.HasPrefix(value, "~"):
				return !slices.Contains(strings.Fields(value[1:]), ns)
			}
			return slices.Contains(strings.Fields(value), ns)
		}
		for _, ns := range confineNamespaces {
			if !allowed(ns) {
				return fmt.Errorf("denies the %s namespace, which confinement creates for every agent", ns)
			}
		}
		r.notes = append(r.notes, "RestrictNamespaces=: checked to allow "+strings.Join(confineNamespaces, ", ")+" (seccomp, not applied)")
		return nil
	},
	"SystemCallFilter": func(value string, r *reproduction) error {
		if strings.HasPrefix(value, "~") {
			denied := strings.Fields(value[1:])
			for call, groups := range confineSyscalls {
				if slices.Contains(denied, call) || slices.ContainsFunc(groups, func(g string) bool { return slices.Contains(denied, g) }) {
					return fmt.Errorf("denies %s, which confinement needs", call)
				}
			}
		} else {
			allowed := strings.Fields(value)
			for call, groups := range confineSyscalls {
				if !slices.Contains(allowed, call) && !slices.ContainsFunc(groups, func(g string) bool { return slices.Contains(allowed, g) }) {
					return fmt.Errorf("does not allow %s (in %s), which confinement needs", call, strings.Join(groups, ", "))
				}
			}
		}
		r.notes = append(r.notes, "SystemCallFilter=: checked to allow the system calls confinement makes (seccomp, not applied)")
		return nil
	},
	"SystemCallErrorNumber":   noEffect("SystemCallErrorNumber=: how denied system calls fail (seccomp, not applied)"),
	"SystemCallArchitectures": noEffect("SystemCallArchitectures=: native only (seccomp, not applied); agenticd is a native binary"),
	"RestrictAddressFamilies": noEffect("RestrictAddressFamilies=: socket(2) families (seccomp, not applied); confinement opens no socket"),
	"RestrictRealtime":        noEffect("RestrictRealtime=: realtime scheduling (seccomp, not applied); confinement uses none"),
	"RestrictSUIDSGID":        noEffect("RestrictSUIDSGID=: set-user-ID files (seccomp, not applied); confinement makes none"),
	"LockPersonality":         noEffect("LockPersonality=: personality(2) (seccomp, not applied); confinement does not call it"),
	"ProtectClock":            noEffect("ProtectClock=: clock system calls and the RTC device (seccomp and device cgroup, not applied); confinement uses neither"),
}

// script is the reproduction's shell script: run as root in new namespaces by unshare,
// it copies the helper ($HELPER) where ExecStart points ($BIN), applies the mounts and
// execs its arguments (the user namespace step, setpriv, the helper).
func (r *reproduction) script() string {
	var b strings.Builder
	b.WriteString(`set -eu
stage=$(dirname "$BIN")/.hardening-stage
inaccessible() {
	[ -e "$1" ] || return 0
	if [ -d "$1" ]; then mount --bind "$stage/dir" "$1"; else mount --bind "$stage/reg" "$1"; fi
	mount -o remount,bind,ro,nosuid,nodev,noexec "$1"
}
read_only() {
	[ -e "$1" ] || return 0
	mount --bind "$1" "$1"
	mount -o remount,bind,ro "$1"
}
under() { [ "$2" = / ] || [ "$1" = "$2" ] || case "$1" in "$2"/*) true;; *) false;; esac; }
# ro_tree ROOT [EXCEPT...]: every mount at or below ROOT read-only, but those at or below EXCEPT.
ro_tree() {
	root=$1; shift
	mountpoint -q "$root" || mount --bind "$root" "$root"
	for p in "$@"; do [ -e "$p" ] && ! mountpoint -q "$p" && mount --bind "$p" "$p"; done
	awk '{print $5}' /proc/self/mountinfo | sort -u | while read -r mp; do
		under "$mp" "$root" || continue
		for p in "$@"; do under "$mp" "$p" && continue 2; done
		mount -o remount,bind,ro "$mp"
	done
}
private_dev() {
	d=$stage/dev; mkdir "$d"
	mount -t tmpfs -o nosuid,noexec,mode=0755 tmpfs "$d"
	for n in null zero full random urandom tty; do touch "$d/$n"; mount --bind "/dev/$n" "$d/$n"; done
	mkdir "$d/pts" "$d/shm"; mount --bind /dev/pts "$d/pts"; mount --bind /dev/shm "$d/shm"
	if [ -L /dev/ptmx ]; then ln -s pts/ptmx "$d/ptmx"; else touch "$d/ptmx"; mount --bind /dev/ptmx "$d/ptmx"; fi
	ln -s /proc/self/fd "$d/fd"; ln -s /proc/self/fd/0 "$d/stdin"; ln -s /proc/self/fd/1 "$d/stdout"; ln -s /proc/self/fd/2 "$d/stderr"
	mount --move "$d" /dev
}
# Where ExecStart points, on a tmpfs of this namespace only.
mkdir -p "$(dirname "$BIN")"
mount -t tmpfs -o mode=0755 tmpfs "$(dirname "$BIN")"
cp "$HELPER" "$BIN"
mkdir -m 0755 "$stage"; mkdir -m 0000 "$stage/dir"; touch "$stage/reg"; chmod 0000 "$stage/reg"
`)
	for _, l := range slices.Concat(r.procfs, r.mounts) {
		b.WriteString(l + "\n")
	}
	if r.strict {
		b.WriteString("ro_tree / /proc /sys /dev")
		for _, p := range r.exclude {
			b.WriteString(" " + p)
		}
		b.WriteString("\n")
	}
	for _, l := range r.readOnly {
		b.WriteString(l + "\n")
	}
	if r.umask != "" {
		b.WriteString("umask " + r.umask + "\n")
	}
	b.WriteString(`exec "$@"` + "\n")
	return b.String()
}

// reproduce builds the reproduction of directives, failing the test on a directive it
// does not know or a value it cannot reproduce.
func reproduce(t *testing.T, directives []unitDirective) reproduction {
	t.Helper()
	var r reproduction
	for _, d := range directives {
		f, ok := hardeningDirectives[d.Key]
		if !ok {
			t.Fatalf("%v: no reproduction: add one to hardeningDirectives (how to apply it without systemd, or why it does not touch confinement)", d)
		}
		if err := f(d.Value, &r); err != nil {
			t.Fatalf("%v: %v", d, err)
		}
	}
	return r
}

// runHardening reproduces directives and returns what the helper (a copy of the test
// binary the ordinary user may run) reported.
func runHardening(t *testing.T, helper string, directives []unitDirective) hardeningReport {
	t.Helper()
	r := reproduce(t, directives)
	bin := "/usr/local/bin/agenticd"
	for _, d := range directives {
		if d.Key == "ExecStart" {
			bin = strings.Fields(strings.TrimLeft(d.Value, "-:+!@"))[0]
		}
	}
	for _, n := range r.notes {
		t.Log(n)
	}
	acct := unprivileged.User(t)
	args := slices.Concat([]string{"--mount", "--propagation", "slave"}, r.unshare,
		[]string{"--", "/bin/sh", "-c", r.script(), "sh"})
	if r.userns {
		args = append(args, bin)
	}
	args = append(args, "setpriv", "--reuid", strconv.Itoa(acct.UID), "--regid", strconv.Itoa(acct.GID), "--clear-groups")
	args = append(args, r.setpriv...)
	args = append(args, "--", bin)
	cmd := exec.Command("unshare", args...)
	mode := "probe"
	if r.userns {
		mode = "userns"
	}
	cmd.Env = append(os.Environ(), "HELPER="+helper, "BIN="+bin, hardeningHelperEnv+"="+mode,
		fmt.Sprintf("%s=%d:%d", hardeningIDsEnv, acct.UID, acct.GID), "TMPDIR=/tmp")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("reproduction of %v failed: %v\nstderr: %s\nscript:\n%s", directives, err, stderr.String(), r.script())
	}
	var rep hardeningReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("helper's report %q: %v (stderr: %s)", stdout.String(), err, stderr.String())
	}
	if rep.UID != acct.UID {
		t.Errorf("the helper ran as uid %d, want the ordinary user %d", rep.UID, acct.UID)
	}
	return rep
}

// checkFull fails unless the report shows the whole boundary and a confined command ran.
func checkFull(t *testing.T, rep hardeningReport) {
	t.Helper()
	if len(rep.Missing) > 0 || rep.Devpts != "" {
		t.Errorf("confinement is partial: %s; missing: %s", rep.Confinement, strings.Join(rep.Missing, "; "))
	}
	if rep.Err != "" || !strings.HasPrefix(rep.Output, "confined\nagenticd-confine ") {
		t.Errorf("the confined command: %q, error %q; want it to write its workspace and see the init as pid 1", rep.Output, rep.Err)
	}
}

// hardeningPrerequisites skips the test where the reproduction cannot run, and returns
// the helper: a copy of the test binary the ordinary user may run.
func hardeningPrerequisites(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("reproducing systemd's sandboxing needs root, as systemd has: run the tests as root")
	}
	if missing := confine.Probe().Missing(); len(missing) > 0 {
		t.Skipf("this machine cannot confine fully even without the unit's sandboxing: %s", strings.Join(missing, "; "))
	}
	for _, tool := range []string{"unshare", "setpriv", "mountpoint", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s (util-linux) is needed to reproduce the unit's sandboxing: %v", tool, err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return unprivileged.Executable(t, self)
}

func shippedUnit(t *testing.T) []unitDirective {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "agenticd.service"))
	if err != nil {
		t.Fatal(err)
	}
	directives, err := parseServiceSection(data)
	if err != nil {
		t.Fatalf("deploy/agenticd.service: %v", err)
	}
	return directives
}

// companions are applied with a directive when it runs alone, as they are in the unit:
// ProtectSystem=strict leaves agenticd nowhere to write without them.
var companions = map[string][]string{
	"ProtectSystem": {"ReadWritePaths", "StateDirectory", "PrivateTmp"},
}

// The whole unit, then each of its directives that changes what the service sees (as the
// ordinary user, with the unit's User=, Group=, UMask=, ExecStart=): a directive that
// breaks confinement is named by its own subtest.
func TestDeployHardeningKeepsConfinement(t *testing.T) {
	helper := hardeningPrerequisites(t)
	directives := shippedUnit(t)
	var base, each []unitDirective
	for _, d := range directives {
		switch d.Key {
		case "User", "Group", "UMask", "ExecStart":
			base = append(base, d)
		default:
			if r := reproduce(t, []unitDirective{d}); !r.changes() {
				continue // checked statically or no effect: the unit subtest logs which
			}
			each = append(each, d)
		}
	}
	t.Run("unit", func(t *testing.T) {
		rep := runHardening(t, helper, directives)
		checkFull(t, rep)
		for _, d := range directives {
			if d.Key == "NoNewPrivileges" && rep.NoNewPrivs != "1" {
				t.Errorf("NoNewPrivileges=yes not in effect: NoNewPrivs %q", rep.NoNewPrivs)
			}
			if d.Key == "CapabilityBoundingSet" && d.Value == "" && strings.Trim(rep.CapBnd, "0") != "" {
				t.Errorf("CapabilityBoundingSet= not in effect: CapBnd %s", rep.CapBnd)
			}
		}
	})
	for _, d := range each {
		t.Run(d.Key, func(t *testing.T) {
			t.Parallel() // each waits on its processes more than it computes
			alone := append(slices.Clone(base), d)
			for _, c := range directives {
				if slices.Contains(companions[d.Key], c.Key) {
					alone = append(alone, c)
				}
			}
			checkFull(t, runHardening(t, helper, alone))
		})
	}
}

// The reproductions can fail: directives that cover parts of /proc with mounts keep a
// user namespace from mounting a /proc of its own, and the probe reports it. These are
// the ones deploy/agenticd.service leaves out or changes.
func TestDeployHardeningCatchesBrokenConfinement(t *testing.T) {
	helper := hardeningPrerequisites(t)
	for _, d := range []unitDirective{
		{Key: "ProtectKernelTunables", Value: "yes"},
		{Key: "ProtectKernelLogs", Value: "yes"},
		{Key: "ProtectHostname", Value: "yes"},
	} {
		t.Run(d.Key, func(t *testing.T) {
			rep := runHardening(t, helper, []unitDirective{{Key: "User", Value: "agenticd"}, d})
			if len(rep.Missing) == 0 || !strings.Contains(rep.Confinement, "mount /proc") {
				t.Errorf("%s=%s: confinement %q, missing %q; want /proc unmountable in the namespace", d.Key, d.Value, rep.Confinement, rep.Missing)
			}
		})
	}
}
