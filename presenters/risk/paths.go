package risk

import (
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agenticd/agenticd/presenters"
)

// The rules in this file look at the paths a command touches rather than at the program:
// reading a file outside the workspace is at least medium, a credential store high and
// the server's own files (database, config with its token, TLS key) critical, whatever
// program does it.

// homeCredentials are files and directories below a home directory that hold credentials.
var homeCredentials = map[string]string{
	".ssh": "SSH keys", ".aws": "AWS credentials", ".config/gcloud": "Google Cloud credentials",
	".kube": "Kubernetes credentials", ".gnupg": "GnuPG keys", ".netrc": "login passwords",
	".docker/config.json": "container registry logins", ".azure": "Azure credentials",
	".config/gh": "GitHub tokens", ".config/hub": "GitHub tokens", ".git-credentials": "git passwords",
	".npmrc": "npm tokens", ".pypirc": "PyPI tokens", ".pgpass": "database passwords",
	".my.cnf": "database passwords", ".password-store": "passwords", ".local/share/keyrings": "keyrings",
	".vault-token": "a Vault token", ".cargo/credentials": "crates.io tokens",
	".cargo/credentials.toml": "crates.io tokens", ".gem/credentials": "RubyGems tokens",
	".terraform.d/credentials.tfrc.json": "Terraform tokens", ".config/rclone": "cloud storage logins",
	".s3cfg": "S3 keys", ".oci": "Oracle Cloud keys", ".config/op": "1Password sessions",
}

// systemCredentials are files and directories of the machine that hold credentials.
var systemCredentials = map[string]string{
	"/etc/shadow": "password hashes", "/etc/gshadow": "password hashes", "/etc/shadow-": "password hashes",
	"/etc/ssl/private": "TLS keys", "/run/secrets": "container secrets", "/var/run/secrets": "service account tokens",
	"/root/.ssh": "SSH keys", "/etc/ssh/ssh_host_rsa_key": "SSH host keys",
	"/etc/ssh/ssh_host_ecdsa_key": "SSH host keys", "/etc/ssh/ssh_host_ed25519_key": "SSH host keys",
}

// privateKeyNames are the names ssh-keygen gives private keys.
var privateKeyNames = map[string]bool{"id_rsa": true, "id_dsa": true, "id_ecdsa": true, "id_ed25519": true,
	"id_ecdsa_sk": true, "id_ed25519_sk": true}

// credentialsIn returns what credentials a path holds, or "" when it holds none known.
// A .env file or a private key counts only outside the workspace: the project's own are
// the project's business.
func (c *classifier) credentialsIn(p string) string {
	homes := []string{"/root"}
	if c.home != "" {
		homes = append(homes, c.home)
	}
	if rest, ok := strings.CutPrefix(p, "/home/"); ok {
		user, _, _ := strings.Cut(rest, "/")
		homes = append(homes, "/home/"+user)
	}
	for _, h := range homes {
		for rel, what := range homeCredentials {
			if under(p, path.Join(h, rel)) {
				return what
			}
		}
	}
	for dir, what := range systemCredentials {
		if under(p, dir) {
			return what
		}
	}
	if parts := strings.Split(p, "/"); len(parts) == 4 && parts[1] == "proc" && (parts[3] == "environ" || parts[3] == "mem") {
		return "a process's environment and memory (API keys, tokens)"
	}
	if c.inWorkspace(p) {
		return ""
	}
	base := path.Base(p)
	switch {
	case base == ".env" || strings.HasPrefix(base, ".env."):
		return "environment secrets"
	case privateKeyNames[base]:
		return "an SSH private key"
	}
	return ""
}

// isProtected reports whether p is, or lies below, one of the server's own files. Both
// the path as written and with its symlinks resolved are compared.
func (c *classifier) isProtected(p string) bool {
	if len(c.protected) == 0 || p == "" {
		return false
	}
	real := realPath(p)
	for _, prot := range c.protected {
		if under(p, prot) || under(real, prot) {
			return true
		}
	}
	return false
}

// realPath resolves the symlinks of the deepest existing ancestor of the absolute path p
// and keeps the rest as written.
func realPath(p string) string {
	var rest []string
	for {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// readSpec says which arguments of a program name files it reads.
type readSpec struct {
	verb string // what it does with them: "reads" unless set
	// valued are options whose value, the next word, is not a file; files are options
	// whose value is a file it reads; code are options whose value is its program or
	// pattern (given one, the first operand is a file again).
	valued, files, code string
	codeFirst           bool // the first operand is the program or pattern
	firstOnly           bool // only the first operand is a file (the rest are SQL, an output file...)
	dot                 bool // with no operand it reads the working directory
	// copies: the last operand (or the -t value) is where it writes, which the write rules
	// judge.
	copies bool
}

var readers = map[string]readSpec{}

func init() {
	for _, n := range strings.Fields("cat tac nl less more bat view wc rev zcat zless zmore bzcat xzcat zstdcat " +
		"md5sum sha1sum sha224sum sha256sum sha384sum sha512sum b2sum cksum sum comm expand tr") {
		readers[n] = readSpec{}
	}
	for n, s := range map[string]readSpec{
		"head": {valued: "-n -c --lines --bytes"}, "tail": {valued: "-n -c -s --lines --bytes --pid --sleep-interval"},
		"sort": {valued: "-k -t -S -T -o --key --field-separator --buffer-size --temporary-directory --output", files: "--files0-from"},
		"uniq": {valued: "-f -s -w", firstOnly: true}, "cut": {valued: "-d -f -c -b --delimiter --fields --characters --bytes"},
		"paste": {valued: "-d --delimiters"}, "join": {valued: "-t -1 -2 -j -o -e -a -v"}, "fold": {valued: "-w --width"},
		"diff": {valued: "-U -C -I -x -F -S --label --ignore-matching-lines --exclude", files: "-X --exclude-from"},
		"cmp":  {valued: "-n -i --bytes --ignore-initial"}, "file": {valued: "-m -e -F", files: "-f --files-from"},
		"strings": {valued: "-n -t -e --bytes --radix --encoding"}, "base64": {valued: "-w --wrap"}, "base32": {valued: "-w --wrap"},
		"xxd": {valued: "-l -s -c -g -o -len -seek -cols -groupsize -offset", firstOnly: true},
		"od":  {valued: "-A -t -N -j -w"}, "hexdump": {valued: "-n -s -e", files: "-f"},
		"stat": {valued: "-c --format --printf"}, "ls": {valued: "-I -w -T --ignore --hide --width", dot: true},
		"tree": {valued: "-L -P -I -o --filelimit", dot: true}, "du": {valued: "-d -B -t --max-depth --block-size --threshold --exclude", dot: true},
		"grep": {valued: "-m -A -B -C -d -D --max-count --after-context --before-context --context --include --exclude --exclude-dir --label",
			files: "-f --file", code: "-e --regexp", codeFirst: true},
		"rg": {valued: "-g -t -T -j -M -r -m -A -B -C -E --glob --iglob --type --type-not --threads --max-columns --replace --max-count --context --encoding",
			files: "-f --file", code: "-e --regexp", codeFirst: true, dot: true},
		"ag":      {valued: "-G -A -B -C -m --ignore --file-search-regex", codeFirst: true, dot: true},
		"ack":     {valued: "-A -B -C -m --type --ignore-dir", codeFirst: true, dot: true},
		"sed":     {valued: "-l --line-length", files: "-f --file", code: "-e --expression", codeFirst: true},
		"awk":     {valued: "-F -v --field-separator --assign", files: "-f --file", codeFirst: true},
		"jq":      {valued: "--indent", files: "-f --from-file", codeFirst: true},
		"sqlite3": {valued: "-cmd -separator -newline -nullvalue", files: "-init", firstOnly: true},
		"source":  {verb: "runs", firstOnly: true}, ".": {verb: "runs", firstOnly: true},
		"cp":    {verb: "copies", valued: "-S --suffix", copies: true},
		"scp":   {verb: "copies", valued: "-P -o -c -l -J -S", files: "-i -F", copies: true},
		"rsync": {verb: "copies", valued: "-e -f --rsh --exclude --include --filter --rsync-path --port", files: "--password-file --exclude-from --include-from --files-from", copies: true},
		"tar":   {verb: "packs or unpacks", valued: "-b -H --format --exclude", files: "-T --files-from -X --exclude-from"},
	} {
		readers[n] = s
	}
	for _, alias := range [][2]string{{"egrep", "grep"}, {"fgrep", "grep"}, {"gawk", "awk"}, {"mawk", "awk"}, {"nawk", "awk"}} {
		readers[alias[0]] = readers[alias[1]]
	}
}

// pathBlind programs take paths as text to print or remember, not to open.
var pathBlind = map[string]bool{"echo": true, "printf": true, "cd": true, "pushd": true, "popd": true,
	"basename": true, "dirname": true, "test": true, "[": true, "[[": true, "which": true, "type": true,
	"export": true, "unset": true, "local": true, "true": true, "false": true, "alias": true}

// reads returns the words of a program's arguments that name files it reads, and the
// indices of the arguments that are neither files nor option words (patterns, programs).
func reads(name string, args []word) (files []word, code map[int]bool) {
	spec, ok := readers[name]
	code = map[int]bool{}
	if name == "find" {
		for _, a := range args {
			if strings.HasPrefix(a.text, "-") || a.text == "(" || a.text == "!" {
				break
			}
			files = append(files, a)
		}
		if len(files) == 0 {
			files = []word{{text: "."}}
		}
		return files, code
	}
	if name == "dd" {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a.text, "if="); ok {
				files = append(files, word{text: v, expands: a.expands, subs: a.subs})
			}
		}
		return files, code
	}
	if !ok {
		return nil, code
	}
	var operands []word
	var operandIdx []int
	var flags []string
	targetGiven, codeGiven := false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a.text == "--" {
			for j := i + 1; j < len(args); j++ {
				operands, operandIdx = append(operands, args[j]), append(operandIdx, j)
			}
			break
		}
		if !strings.HasPrefix(a.text, "-") || len(a.text) < 2 || a.quoted {
			operands, operandIdx = append(operands, a), append(operandIdx, i)
			continue
		}
		flags = append(flags, a.text)
		opt, value, inline := strings.Cut(a.text, "=")
		if !inline && i+1 < len(args) && (inList(spec.valued, opt) || inList(spec.files, opt) || inList(spec.code, opt) ||
			spec.copies && (opt == "-t" || opt == "--target-directory")) {
			i++
			a = args[i]
		} else if inline {
			a = word{text: value, expands: a.expands, subs: a.subs}
		} else {
			continue
		}
		switch {
		case inList(spec.files, opt):
			files = append(files, a)
			codeGiven = true
		case inList(spec.code, opt):
			code[i] = true
			codeGiven = true
		case opt == "-t" || opt == "--target-directory":
			targetGiven = true
		}
	}
	if spec.codeFirst && !codeGiven && len(operands) > 0 {
		code[operandIdx[0]] = true
		operands = operands[1:]
	}
	if spec.firstOnly && len(operands) > 1 {
		operands = operands[:1]
	}
	if spec.copies && !targetGiven && len(operands) > 1 {
		operands = operands[:len(operands)-1]
	}
	grepRecursive := (name == "grep" || name == "egrep" || name == "fgrep") && (hasShort(flags, 'r', "--recursive") || hasShort(flags, 'R'))
	if len(operands) == 0 && (spec.dot || grepRecursive) {
		operands = []word{{text: "."}}
	}
	for _, o := range operands {
		if o.text != "-" {
			files = append(files, o)
		}
	}
	return files, code
}

// access adds what a command touches by path: files it reads outside the workspace or at
// paths only known when the line runs (medium), credential stores (high) and the server's
// own files (critical). Options' values (--key=~/.ssh/id_rsa, -v ~/.aws:/root/.aws) and
// redirections count too; programs that only print paths do not.
func (c *classifier) access(cmd simpleCmd, inv invocation) {
	name := inv.base()
	args := inv.args()
	spec := readers[name]
	verb := spec.verb
	if verb == "" {
		verb = "reads"
	}
	a := accessed{c: c, program: name, verb: verb}
	files, code := reads(name, args)
	for _, f := range files {
		a.read(f)
	}
	for _, r := range cmd.redirects {
		switch {
		case r.op == "<":
			a.verb = "reads"
			a.read(r.target)
		case !r.dup && strings.Contains(r.op, ">"):
			a.touch(r.target, "writes")
		}
	}
	a.verb = verb
	if !pathBlind[name] {
		inline := inlineCodeFlag(name, args) != ""
		for i, w := range args {
			if code[i] || slices.ContainsFunc(files, func(f word) bool { return f.text == w.text }) {
				continue
			}
			if inline {
				for _, lit := range codePaths(w.text) {
					a.read(word{text: lit})
				}
			}
			for _, cand := range pathsIn(w) {
				a.touch(cand, "uses")
			}
		}
	}
	a.report()
}

// accessed gathers the paths one command touches, worst first within each kind.
type accessed struct {
	c       *classifier
	program string
	verb    string
	seen    map[string]bool
	// kinds, by rank: the server's files, credentials, reads outside, unknown reads.
	protected, credentials, outside, unknown []touched
}

type touched struct {
	shown string // as written, with where it resolves when that differs
	abs   string // resolved, for the signature
	what  string // the credentials it holds
	verb  string
}

// read records a file the program reads: any place but the workspace counts.
func (a *accessed) read(w word) {
	switch {
	case w.text == "$(...)" && len(w.subs) == 1 && listsWorkspacePaths(w.subs[0]):
		return // wc -l $(git ls-files): names of files in the workspace
	case w.text == "<(...)" || w.text == ">(...)":
		return // a pipe to a command, which is classified on its own
	}
	p, known := a.c.resolve(w)
	if !known {
		if !a.mark("?" + w.text) {
			a.unknown = append(a.unknown, touched{shown: w.text, verb: a.verb})
		}
		return
	}
	if p == "" || a.touch(w, a.verb) {
		return
	}
	where := a.c.place(w)
	if where == placeInside || where == placeHarmless || a.mark(p) {
		return
	}
	a.outside = append(a.outside, touched{shown: shown(w.text, p), abs: p, verb: a.verb})
}

// touch records a path the program uses in any way when it is one of the server's files
// or holds credentials, and reports whether it was.
func (a *accessed) touch(w word, verb string) bool {
	p, known := a.c.resolve(w)
	if !known || p == "" {
		return false
	}
	t := touched{shown: shown(w.text, p), abs: p, verb: verb}
	if a.c.isProtected(p) {
		if !a.mark(p) {
			a.protected = append(a.protected, t)
		}
		return true
	}
	what := a.c.credentialsIn(p)
	if what == "" {
		return false
	}
	if !a.mark(p) {
		t.what = what
		a.credentials = append(a.credentials, t)
	}
	return true
}

func (a *accessed) mark(key string) bool {
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	was := a.seen[key]
	a.seen[key] = true
	return was
}

func (a *accessed) report() {
	add := func(ts []touched, level presenters.RiskLevel, reason func(touched) string, suggestion string) {
		if len(ts) == 0 {
			return
		}
		sig := a.program
		for _, t := range ts {
			if t.abs == "" {
				sig += " $var"
				break
			}
			sig += " " + t.abs
		}
		r := reason(ts[0])
		if len(ts) > 1 {
			r += " (and " + plural(len(ts)-1, "more path") + ")"
		}
		a.c.add(finding{level: level, reason: r, suggestion: suggestion, signature: sig, base: a.program, path: true})
	}
	add(a.protected, critical, func(t touched) string {
		return t.verb + " " + t.shown + ", one of agenticd's own files (its database, its config with the access token, or its TLS key)"
	}, "never let an agent read or change the server's own files")
	add(a.credentials, high, func(t touched) string {
		return t.verb + " " + t.shown + ", which holds " + t.what
	}, "do not hand credentials to an agent; copy what it needs into the workspace yourself")
	add(a.outside, medium, func(t touched) string {
		return t.verb + " " + t.shown + ", outside the workspace"
	}, "check that it should see this path")
	add(a.unknown, medium, func(t touched) string {
		return t.verb + " " + t.shown + ", a path only known when the line runs"
	}, "spell the path out")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// shown is a path as written, followed by where it resolves when that reads differently.
func shown(written, abs string) string {
	if written == abs || strings.HasPrefix(written, "~") || strings.HasPrefix(written, "$HOME") || strings.HasPrefix(written, "${HOME}") {
		return written
	}
	return written + " (" + abs + ")"
}

// pathsIn returns the words an argument may name a path with: itself, the value of an
// option (--key=~/.ssh/id_rsa), a file given with @ (curl -d @file) and the host side of
// a volume (-v ~/.aws:/root/.aws).
func pathsIn(w word) []word {
	out := []word{w}
	text := w.text
	if _, v, ok := strings.Cut(text, "="); ok {
		text = v
		out = append(out, word{text: v, expands: w.expands, subs: w.subs})
	}
	if v, ok := strings.CutPrefix(text, "@"); ok {
		text = v
		out = append(out, word{text: v, expands: w.expands, subs: w.subs})
	}
	if host, _, ok := strings.Cut(text, ":"); ok && (strings.HasPrefix(host, "/") || strings.HasPrefix(host, "~")) {
		out = append(out, word{text: host, expands: w.expands, subs: w.subs})
	}
	return out
}

// quotedPath finds string literals in inline code that look like absolute or home paths,
// or that climb out of the directory.
var quotedPath = regexp.MustCompile(`["']((?:/|~/|\.\./)[^"'\s]*)["']`)

// codePaths returns the paths named by string literals in code given on the command line
// (python3 -c "open('/etc/passwd')").
func codePaths(code string) []string {
	var out []string
	for _, m := range quotedPath.FindAllStringSubmatch(code, -1) {
		out = append(out, m[1])
	}
	return out
}

// namedOutside returns the first path that code given on the command line names outside
// the workspace or in a credential store, or "".
func (c *classifier) namedOutside(args []word) string {
	for _, a := range args {
		for _, lit := range codePaths(a.text) {
			w := word{text: lit}
			if p, known := c.resolve(w); known && p != "" && (c.place(w) != placeInside || c.credentialsIn(p) != "" || c.isProtected(p)) {
				return shown(lit, p)
			}
		}
	}
	return ""
}

// listsWorkspacePaths reports whether a substitution only prints names of files below
// the current directory: git ls-files, find . -name x, ls, possibly filtered by grep, sort,
// uniq, head or tail.
func listsWorkspacePaths(src string) bool {
	pls := parse(src)
	if len(pls) == 0 {
		return false
	}
	for _, pl := range pls {
		for i, cmd := range pl {
			inv := unwrap(cmd.words)
			args := inv.args()
			_, operands := splitArgs(args)
			switch name := inv.base(); {
			case i > 0 && inList("grep sort uniq head tail", name):
			case i == 0 && name == "git" && len(operands) > 0 && inList("ls-files diff", operands[0].text) &&
				(operands[0].text == "ls-files" || slices.ContainsFunc(args, func(w word) bool { return w.text == "--name-only" })):
			case i == 0 && name == "ls" && len(operands) == 0:
			case i == 0 && name == "find":
				starts, _ := reads("find", args)
				for _, s := range starts {
					if s.expands || path.IsAbs(s.text) || strings.HasPrefix(s.text, "~") || strings.HasPrefix(s.text, "..") {
						return false
					}
				}
			default:
				return false
			}
		}
	}
	return true
}
