// Package risk classifies shell command lines (low, medium, high, critical) for the
// permission policies of the DeepChat and ACP presenters. It reads the line with a small
// tokenizer (quotes, escapes, pipes, lists, subshells, substitutions, redirections,
// variable prefixes and wrappers such as sudo, env, xargs, sh -c) and applies rules per
// program. It is advice for a person and a policy, not a sandbox: the workspace bounds
// are enforced by sandbox/.
package risk

import (
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agenticd/agenticd/presenters"
)

// maxDepth bounds nested `sh -c` / substitution classification.
const maxDepth = 4

// Classifier classifies command lines for one server: it knows the server's own files
// (its data directory, config file and TLS key), which a command must not touch.
type Classifier struct {
	// protected are absolute clean paths, each also in its symlink-resolved form.
	protected []string
}

// NewClassifier returns a Classifier that rates any command touching one of the protected
// files or directories, or a path below one, critical. Paths may start with "~"; relative
// paths are taken from the current directory; empty paths are skipped.
func NewClassifier(protected []string) *Classifier {
	k := &Classifier{}
	home := os.Getenv("HOME")
	for _, p := range protected {
		if p == "" {
			continue
		}
		if (p == "~" || strings.HasPrefix(p, "~/")) && home != "" {
			p = home + p[1:]
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue // only when the current directory is gone: nothing to compare with
		}
		k.protected = appendNew(k.protected, abs)
		k.protected = appendNew(k.protected, realPath(abs))
	}
	return k
}

// Classify reads a shell command line that would run with the workspace as its working
// directory. Signature is a normalized form of the line (program, subcommand and the
// flags and paths that matter) for remembering an allow-always answer; BaseCommand is the
// program behind the riskiest part. A nil Classifier protects no paths.
func (k *Classifier) Classify(command, workspace string) presenters.CommandInfo {
	return k.ClassifyIn(command, workspace, "")
}

// ClassifyIn is Classify for a line that starts in the directory cwd: absolute, or
// relative to the workspace ("" is the workspace itself).
func (k *Classifier) ClassifyIn(command, workspace, cwd string) presenters.CommandInfo {
	c := &classifier{workspace: cleanDir(workspace), home: cleanDir(os.Getenv("HOME"))}
	if k != nil {
		c.protected = k.protected
	}
	switch {
	case cwd == "":
		c.cwd = c.workspace
	case path.IsAbs(cwd):
		c.cwd = path.Clean(cwd)
	case c.workspace != "":
		c.cwd = path.Join(c.workspace, cwd)
	}
	if strings.Contains(strings.ReplaceAll(command, " ", ""), ":(){:|:&};:") {
		c.add(finding{level: presenters.RiskCritical, reason: "a fork bomb: it starts processes until the machine stops responding",
			suggestion: "do not run it", signature: "fork bomb", base: ":"})
	} else {
		c.line(command, context{})
	}
	info := presenters.CommandInfo{Command: command, RiskLevel: presenters.RiskLow}
	if len(c.findings) == 0 {
		info.Reason = "nothing to run"
		return info
	}
	top := c.findings[0]
	var sigs []string
	seen := map[string]bool{}
	for _, f := range c.findings {
		// Of equally risky findings, one about a path says more than one about the program.
		if f.level.Rank() > top.level.Rank() || f.level.Rank() == top.level.Rank() && f.path && !top.path {
			top = f
		}
		if f.signature != "" && !seen[f.signature] {
			seen[f.signature] = true
			sigs = append(sigs, f.signature)
		}
	}
	info.RiskLevel, info.Reason, info.Suggestion, info.BaseCommand = top.level, top.reason, top.suggestion, top.base
	info.Signature = strings.Join(sigs, "; ")
	return info
}

type finding struct {
	level      presenters.RiskLevel
	reason     string
	suggestion string
	signature  string
	base       string
	path       bool // about a path the command touches, not the program
}

func atLeast(l, floor presenters.RiskLevel) presenters.RiskLevel {
	if l.Rank() < floor.Rank() {
		return floor
	}
	return l
}

func bump(l presenters.RiskLevel) presenters.RiskLevel {
	switch l {
	case presenters.RiskLow:
		return presenters.RiskMedium
	case presenters.RiskMedium:
		return presenters.RiskHigh
	}
	return presenters.RiskCritical
}

type classifier struct {
	workspace string
	home      string
	protected []string
	// cwd is where relative paths start: the workspace until a `cd` moves it. It is ""
	// when there is neither a workspace nor a cwd to resolve against.
	cwd string
	// cwdUnknown is set after a `cd` whose target is only known when the line runs.
	cwdUnknown bool
	findings   []finding
}

// context is what surrounds a command: sudo before it, nesting depth.
type context struct {
	depth     int
	escalated bool
}

func (c *classifier) add(f finding) { c.findings = append(c.findings, f) }

func (c *classifier) line(src string, ctx context) {
	if ctx.depth > maxDepth {
		c.add(finding{level: presenters.RiskHigh, reason: "commands nested too deeply to read",
			suggestion: "run the inner command directly", signature: "nested shell", base: "sh"})
		return
	}
	if ctx.depth > 0 {
		// A nested line (sh -c, a substitution) runs in a shell of its own: its `cd` does
		// not move the commands after it.
		defer func(cwd string, unknown bool) { c.cwd, c.cwdUnknown = cwd, unknown }(c.cwd, c.cwdUnknown)
	}
	for _, pl := range parse(src) {
		c.pipeline(pl, ctx)
	}
}

func (c *classifier) pipeline(pl pipeline, ctx context) {
	downloader := ""
	for i, cmd := range pl {
		inv := unwrap(cmd.words)
		name := inv.base()
		if i > 0 && downloader != "" && interpreters[name] && !inv.hasFlag("-c") {
			c.add(finding{level: presenters.RiskCritical,
				reason:     "pipes a download from the network straight into " + name + ": it runs code nobody has read",
				suggestion: "download the script to a file, read it, then run it",
				signature:  downloader + " | " + name, base: name})
		}
		if downloaders[name] {
			downloader = name
		}
		if decoderStage(inv) && i+1 < len(pl) && interpreters[unwrap(pl[i+1].words).base()] {
			c.add(finding{level: presenters.RiskHigh, reason: "decodes hidden data and runs it as a program",
				suggestion: "decode it to a file and read it first", signature: "base64 -d | sh", base: "base64"})
		}
		c.simple(cmd, inv, ctx)
	}
}

// invocation is a command after its variable assignments and wrappers (sudo, env,
// nohup, xargs...) were taken off.
type invocation struct {
	words      []word
	escalation string // "sudo", "doas", "su", "pkexec" when the command runs as root
	assigns    bool
}

func (v invocation) base() string {
	if len(v.words) == 0 {
		return ""
	}
	return path.Base(v.words[0].text)
}

func (v invocation) args() []word {
	if len(v.words) < 2 {
		return nil
	}
	return v.words[1:]
}

func (v invocation) hasFlag(flags ...string) bool {
	for _, a := range v.args() {
		for _, f := range flags {
			if a.text == f {
				return true
			}
		}
	}
	return false
}

// shellKeywords begin compound commands; the command behind them is what runs.
var shellKeywords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true, "done": true,
	"while": true, "until": true, "!": true, "{": true, "}": true, "esac": true,
}

// wrapperArgs lists the options of wrapper programs that take a separate value.
var wrapperArgs = map[string]string{
	"sudo": "-u -g -U -C -D -h -p -r -t -T", "doas": "-u -C", "env": "-u -C -S", "nice": "-n",
	"ionice": "-c -n -p", "timeout": "-s -k --signal --kill-after", "xargs": "-I -n -P -d -a -L -s -E",
	"watch": "-n -d", "stdbuf": "-i -o -e", "nohup": "", "time": "", "command": "", "builtin": "",
	"exec": "", "pkexec": "--user", "chronic": "", "unbuffer": "", "caffeinate": "",
}

func unwrap(words []word) invocation {
	var v invocation
	for len(words) > 0 {
		w := words[0]
		switch {
		case shellKeywords[w.text] && !w.quoted:
			words = words[1:]
			continue
		case isAssignment(w):
			v.assigns = true
			words = words[1:]
			continue
		}
		name := path.Base(w.text)
		takes, isWrapper := wrapperArgs[name]
		if !isWrapper {
			break
		}
		switch name {
		case "sudo", "doas", "pkexec":
			v.escalation = name
		}
		words = words[1:]
		for len(words) > 0 {
			a := words[0].text
			if a == "--" {
				words = words[1:]
				break
			}
			if name == "env" && isAssignment(words[0]) {
				words = words[1:]
				continue
			}
			if !strings.HasPrefix(a, "-") || a == "-" {
				break
			}
			words = words[1:]
			if strings.Contains(" "+takes+" ", " "+a+" ") && len(words) > 0 {
				words = words[1:]
			}
		}
		if name == "timeout" && len(words) > 0 { // the duration
			words = words[1:]
		}
	}
	v.words = words
	return v
}

func isAssignment(w word) bool {
	eq := strings.IndexByte(w.text, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		if !isNameByte(w.text[i]) || (i == 0 && w.text[i] >= '0' && w.text[i] <= '9') {
			return false
		}
	}
	return true
}

func decoderStage(v invocation) bool {
	return v.base() == "base64" && v.hasFlag("-d", "--decode", "-D")
}

var downloaders = map[string]bool{"curl": true, "wget": true, "fetch": true, "aria2c": true, "http": true, "https": true}

var interpreters = map[string]bool{
	"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "fish": true, "csh": true, "tcsh": true,
	"python": true, "python3": true, "perl": true, "ruby": true, "node": true, "php": true,
}

// simple classifies one command of a pipeline, its substitutions and its redirections.
func (c *classifier) simple(cmd simpleCmd, inv invocation, ctx context) {
	if inv.escalation != "" {
		ctx.escalated = true
	}
	for _, w := range cmd.words {
		for _, sub := range w.subs {
			c.line(sub, context{depth: ctx.depth + 1, escalated: ctx.escalated})
		}
	}
	name := inv.base()
	if interpreters[name] || name == "eval" || name == "source" || name == "." {
		for _, w := range inv.args() {
			for _, sub := range w.subs {
				if lineDownloads(sub) {
					c.add(finding{level: presenters.RiskCritical,
						reason:     "runs code downloaded from the network with " + name + ": nobody has read it",
						suggestion: "download the script to a file, read it, then run it",
						signature:  "curl | " + name, base: name})
				}
			}
		}
	}
	start := len(c.findings)
	for _, r := range cmd.redirects {
		c.redirect(r, name)
	}
	if len(inv.words) == 0 {
		if len(cmd.redirects) == 0 && (inv.assigns || inv.escalation != "") {
			f := finding{level: presenters.RiskLow, reason: "sets shell variables", signature: "assignment", base: ""}
			if inv.escalation != "" {
				f = finding{level: presenters.RiskHigh, reason: "starts a root shell (" + inv.escalation + ")",
					suggestion: "run the specific command that needs root yourself", signature: inv.escalation, base: inv.escalation}
			}
			c.add(f)
		}
	} else {
		c.program(inv, ctx)
		c.access(cmd, inv)
		if name == "cd" || name == "pushd" {
			c.chdir(inv.args())
		}
	}
	if ctx.escalated {
		esc := inv.escalation
		if esc == "" {
			esc = "sudo"
		}
		for i := start; i < len(c.findings); i++ {
			f := &c.findings[i]
			f.level = atLeast(bump(f.level), presenters.RiskHigh)
			f.reason = "runs as root (" + esc + "): " + f.reason
			if f.suggestion == "" {
				f.suggestion = "run it without root privileges, or run it yourself"
			}
			if inv.escalation != "" {
				f.signature = inv.escalation + " " + f.signature
			}
		}
	}
}

// lineDownloads reports whether a command line runs a downloader anywhere.
func lineDownloads(src string) bool {
	for _, pl := range parse(src) {
		for _, cmd := range pl {
			if downloaders[unwrap(cmd.words).base()] {
				return true
			}
		}
	}
	return false
}

func (c *classifier) redirect(r redirect, program string) {
	if r.dup || !strings.Contains(r.op, ">") {
		return
	}
	target := r.target
	where := c.place(target)
	sig := ">"
	if program != "" {
		sig = program + " >"
	}
	switch where {
	case placeHarmless:
		return
	case placeDisk:
		c.add(finding{level: presenters.RiskCritical, reason: "writes straight to the disk device " + target.text + ", destroying its file system",
			suggestion: "do not write to disk devices", signature: sig + " " + target.text, base: program})
	case placeSystem, placeRoot:
		c.add(finding{level: presenters.RiskCritical, reason: "overwrites the system file " + target.text,
			suggestion: "write inside the workspace instead", signature: sig + " " + target.text, base: program})
	case placeOutside:
		c.add(finding{level: presenters.RiskHigh, reason: "writes " + target.text + ", outside the workspace",
			suggestion: "write inside the workspace instead", signature: sig + " " + target.text, base: program})
	case placeUnknown:
		c.add(finding{level: presenters.RiskMedium, reason: "writes to a file whose name depends on a variable (" + target.text + ")",
			suggestion: "check where it writes", signature: sig + " $var", base: program})
	default:
		c.add(finding{level: presenters.RiskMedium, reason: "writes the file " + target.text + " in the workspace",
			suggestion: "check the file it overwrites", signature: sig, base: program})
	}
}

// place is where a path lies relative to the workspace.
type place int

const (
	placeInside   place = iota
	placeHarmless       // /dev/null, /dev/stderr...
	placeUnknown        // depends on a variable or substitution
	placeOutside
	placeSystem // /etc, /usr, /bin...
	placeRoot   // /, /*, the home directory
	placeDisk   // a block device
)

var systemDirs = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
	"/proc", "/root", "/sbin", "/srv", "/sys", "/usr", "/var"}

var harmlessDevices = map[string]bool{"/dev/null": true, "/dev/zero": true, "/dev/stdout": true,
	"/dev/stderr": true, "/dev/stdin": true, "/dev/tty": true, "/dev/random": true, "/dev/urandom": true}

var diskPrefixes = []string{"/dev/sd", "/dev/hd", "/dev/vd", "/dev/xvd", "/dev/nvme", "/dev/mmcblk", "/dev/disk", "/dev/mapper/", "/dev/md", "/dev/dm-", "/dev/loop"}

func (c *classifier) place(w word) place {
	p, known := c.resolve(w)
	switch {
	case !known && isHomeRelative(w.text) && c.home == "":
		return placeOutside
	case !known:
		return placeUnknown
	case p == "":
		return placeInside // a relative path with no workspace to compare it with
	}
	trimmed := strings.TrimSuffix(strings.TrimSuffix(p, "/*"), "/.*")
	if c.inWorkspace(p) && trimmed != "/" {
		return placeInside
	}
	if harmlessDevices[p] || strings.HasPrefix(p, "/dev/fd/") || strings.HasPrefix(p, "/dev/pts/") {
		return placeHarmless
	}
	for _, d := range diskPrefixes {
		if strings.HasPrefix(p, d) {
			return placeDisk
		}
	}
	if p == "/" || trimmed == "" || trimmed == "/" || (c.home != "" && (trimmed == c.home)) {
		return placeRoot
	}
	for _, d := range systemDirs {
		if under(p, d) {
			return placeSystem
		}
	}
	return placeOutside
}

// resolve returns the absolute clean path a word names, with "~" and $HOME expanded and a
// relative path taken from the current directory. known is false when the path is only
// known when the line runs (a variable, a substitution, a directory a `cd $DIR` chose);
// the path is "" for a relative path with no workspace or cwd to resolve it against.
func (c *classifier) resolve(w word) (p string, known bool) {
	p = w.text
	switch {
	case p == "":
		return "", false
	case isHomeRelative(p):
		if c.home == "" {
			return "", false
		}
		p = c.home + strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(p, "~"), "${HOME}"), "$HOME")
		if w.expands && strings.ContainsAny(p, "$`") {
			return "", false
		}
	case w.expands:
		return "", false
	}
	if !path.IsAbs(p) {
		if c.cwdUnknown {
			return "", false
		}
		if c.cwd == "" {
			return "", true
		}
		p = path.Join(c.cwd, p)
	}
	return path.Clean(p), true
}

// isHomeRelative reports whether a path starts at the home directory: ~, ~/x, $HOME/x.
func isHomeRelative(p string) bool {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return true
	}
	for _, h := range []string{"$HOME", "${HOME}"} {
		if p == h || strings.HasPrefix(p, h+"/") {
			return true
		}
	}
	return false
}

func (c *classifier) inWorkspace(p string) bool {
	return c.workspace != "" && under(p, c.workspace)
}

// under reports whether the clean path p is dir or lies below it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// chdir follows a `cd` (or pushd), so that the paths of later commands resolve from
// where it went.
func (c *classifier) chdir(args []word) {
	_, operands := splitArgs(args)
	if len(operands) == 0 {
		operands = []word{{text: "~"}}
	}
	if operands[0].text == "-" {
		c.cwdUnknown = true
		return
	}
	p, known := c.resolve(operands[0])
	if !known {
		c.cwdUnknown = true
		return
	}
	if p != "" {
		c.cwd = p
	}
}

// worst returns the farthest place of the words (root > system > outside > unknown > inside).
func (c *classifier) worst(ws []word) (place, string) {
	worst, which := placeInside, ""
	for _, w := range ws {
		p := c.place(w)
		if p == placeHarmless {
			continue
		}
		if p > worst {
			worst, which = p, w.text
		}
	}
	return worst, which
}

func cleanDir(d string) string {
	if d == "" || !path.IsAbs(d) {
		return ""
	}
	return path.Clean(d)
}

// splitArgs separates options from operands (everything after "--" is an operand).
func splitArgs(args []word) (flags []string, operands []word) {
	for i, a := range args {
		if a.text == "--" {
			return flags, append(operands, args[i+1:]...)
		}
		if strings.HasPrefix(a.text, "-") && len(a.text) > 1 && !a.quoted {
			flags = append(flags, a.text)
		} else {
			operands = append(operands, a)
		}
	}
	return flags, operands
}

// hasShort reports whether a short option letter appears in any cluster ("-rf") or a
// long option is present.
func hasShort(flags []string, letter byte, long ...string) bool {
	for _, f := range flags {
		if strings.HasPrefix(f, "--") {
			for _, l := range long {
				if f == l || strings.HasPrefix(f, l+"=") {
					return true
				}
			}
			continue
		}
		if strings.IndexByte(f[1:], letter) >= 0 {
			return true
		}
	}
	return false
}
