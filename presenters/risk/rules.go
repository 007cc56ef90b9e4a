package risk

import (
	"slices"
	"strings"

	"github.com/agenticd/agenticd/presenters"
)

const (
	low      = presenters.RiskLow
	medium   = presenters.RiskMedium
	high     = presenters.RiskHigh
	critical = presenters.RiskCritical
)

// readOnly programs only read files or print information.
var readOnly = map[string]bool{
	"ls": true, "cat": true, "head": true, "tail": true, "less": true, "more": true, "grep": true, "egrep": true,
	"fgrep": true, "rg": true, "ag": true, "ack": true, "pwd": true, "echo": true, "printf": true, "wc": true,
	"sort": true, "uniq": true, "diff": true, "cmp": true, "file": true, "stat": true, "which": true,
	"whereis": true, "type": true, "whoami": true, "id": true, "date": true, "uname": true, "hostname": true,
	"tree": true, "du": true, "df": true, "cut": true, "tr": true, "basename": true, "dirname": true,
	"realpath": true, "readlink": true, "true": true, "false": true, "test": true, "[": true, "[[": true,
	"jq": true, "column": true, "nl": true, "od": true, "hexdump": true, "xxd": true, "md5sum": true,
	"sha1sum": true, "sha256sum": true, "sha512sum": true, "printenv": true, "ps": true, "man": true,
	"help": true, "cd": true, "pushd": true, "popd": true, "export": true, "unset": true, "set": true,
	"sleep": true, "seq": true, "fold": true, "comm": true, "paste": true, "join": true, "tac": true,
	"rev": true, "strings": true, "base64": true, "base32": true, "zcat": true, "awk": true, "gawk": true, "sed": true, "env": true, "locale": true,
	"uptime": true, "free": true, "nproc": true, "lsof": true, "pgrep": true, "exit": true, "read": true,
	"local": true, "return": true, "shift": true, "wait": true, "jobs": true, "alias": true, "cal": true,
	"for": true, "case": true, "select": true, "function": true, "tput": true, "clear": true, "yes": true,
}

// builders build, test, run or install project code: changes inside the project.
var builders = map[string]bool{
	"make": true, "cmake": true, "ninja": true, "go": true, "cargo": true, "rustc": true, "npm": true,
	"npx": true, "yarn": true, "pnpm": true, "bun": true, "bunx": true, "deno": true, "node": true,
	"python": true, "python3": true, "pip": true, "pip3": true, "pipx": true, "uv": true, "poetry": true,
	"pytest": true, "tox": true, "ruby": true, "bundle": true, "gem": true, "rake": true, "perl": true,
	"php": true, "composer": true, "java": true, "javac": true, "mvn": true, "gradle": true, "gradlew": true,
	"gcc": true, "g++": true, "cc": true, "clang": true, "clang++": true, "ld": true, "tsc": true,
	"jest": true, "vitest": true, "mocha": true, "eslint": true, "prettier": true, "gofmt": true,
	"goimports": true, "golangci-lint": true, "buf": true, "protoc": true, "dotnet": true, "swift": true,
	"mix": true, "elixir": true, "erl": true, "ghc": true, "stack": true, "cabal": true, "zig": true,
	"bazel": true, "patch": true, "tar": true, "unzip": true, "zip": true, "gzip": true,
	"gunzip": true, "xz": true, "sh": true, "bash": true, "zsh": true, "dash": true, "source": true, ".": true,
}

// publishers push packages to a registry: other people get what they upload.
var publishSubcommands = map[string]bool{"publish": true, "unpublish": true, "deprecate": true, "yank": true, "push": true, "upload": true}

// remoteTools reach other machines.
var remoteTools = map[string]bool{"ssh": true, "scp": true, "sftp": true, "rsync": true, "ftp": true,
	"nc": true, "ncat": true, "netcat": true, "telnet": true, "socat": true}

// machineTools change the machine itself.
var machineTools = map[string]string{
	"mount": "mounts file systems", "umount": "unmounts file systems", "iptables": "changes the firewall",
	"ip6tables": "changes the firewall", "nft": "changes the firewall", "ufw": "changes the firewall",
	"useradd": "creates users", "userdel": "deletes users", "usermod": "changes users", "passwd": "changes passwords",
	"groupadd": "creates groups", "visudo": "changes sudo rules", "chattr": "changes file attributes",
	"sysctl": "changes kernel settings", "modprobe": "loads kernel modules", "insmod": "loads kernel modules",
	"rmmod": "unloads kernel modules", "swapoff": "disables swap", "crontab": "changes scheduled jobs",
	"setenforce": "changes SELinux", "chroot": "changes the root directory", "launchctl": "changes system services",
}

// diskTools rewrite disks or partitions.
var diskTools = map[string]bool{"fdisk": true, "sfdisk": true, "cfdisk": true, "parted": true, "gdisk": true,
	"sgdisk": true, "wipefs": true, "mkswap": true, "swapon": true, "badblocks": true}

// packageManagers install software for the whole machine.
var packageManagers = map[string]bool{"apt": true, "apt-get": true, "aptitude": true, "dpkg": true, "yum": true,
	"dnf": true, "rpm": true, "pacman": true, "zypper": true, "apk": true, "brew": true, "snap": true,
	"flatpak": true, "port": true, "emerge": true, "nix-env": true}

func (c *classifier) program(inv invocation, ctx context) {
	name := inv.base()
	args := inv.args()
	flags, operands := splitArgs(args)
	f := func(level presenters.RiskLevel, reason, suggestion, signature string) {
		c.add(finding{level: level, reason: reason, suggestion: suggestion, signature: signature, base: name})
	}
	if program := inv.words[0]; program.expands {
		// $(echo rm) -rf /, a=rm; $a -rf /: what runs cannot be read from the line.
		f(high, "runs a program whose name is computed when the line runs ("+program.text+")",
			"spell the program name out", program.text)
		return
	}
	if flag := inlineCodeFlag(name, args); flag != "" {
		reason := name + " runs code given on the command line (" + flag + "), which no file in the workspace holds"
		if p := c.namedOutside(args); p != "" {
			reason += "; it names " + p
		}
		f(high, reason, "write the code to a file in the workspace and run that", name+" "+flag)
		return
	}
	switch {
	case name == "rm" || name == "rmdir" || name == "unlink" || name == "shred":
		c.remove(name, flags, operands)
	case name == "git":
		c.git(args)
	case name == "find":
		c.find(args, ctx)
	case name == "xargs":
		f(medium, "runs a command for every input line", "check the command it runs", "xargs")
	case name == "sh" || name == "bash" || name == "zsh" || name == "dash" || name == "ksh" || name == "fish":
		c.shell(name, args, ctx)
	case name == "eval":
		var src []string
		computed := false
		for _, a := range args {
			src = append(src, a.text)
			computed = computed || a.expands
		}
		if computed {
			f(high, "evaluates shell code built when the line runs", "run the command directly", "eval $var")
		} else {
			f(medium, "evaluates a string as shell code", "run the command directly", "eval")
		}
		c.line(strings.Join(src, " "), context{depth: ctx.depth + 1, escalated: ctx.escalated})
	case name == "su":
		if i := indexOf(args, "-c"); i >= 0 && i+1 < len(args) {
			c.line(args[i+1].text, context{depth: ctx.depth + 1, escalated: true})
			return
		}
		f(high, "switches to another user (su)", "run the specific command that needs it yourself", "su")
	case name == "sudo" || name == "doas" || name == "pkexec":
		f(high, "starts a root shell ("+name+")", "run the specific command that needs root yourself", name)
	case name == "chmod" || name == "chown" || name == "chgrp":
		c.permissions(name, flags, operands)
	case name == "dd":
		c.dd(args)
	case strings.HasPrefix(name, "mkfs") || diskTools[name]:
		f(critical, name+" rewrites a disk or partition and destroys the data on it", "do not run disk tools from an agent", name)
	case name == "shutdown" || name == "reboot" || name == "halt" || name == "poweroff" ||
		(name == "init" && len(operands) > 0 && (operands[0].text == "0" || operands[0].text == "6")) ||
		(name == "systemctl" && len(operands) > 0 && inList("poweroff reboot halt kexec suspend hibernate", operands[0].text)):
		f(critical, "shuts down or restarts the machine", "do not run it from an agent", name)
	case name == "systemctl" || name == "service":
		verb := ""
		if len(operands) > 0 {
			verb = operands[0].text
			if name == "service" && len(operands) > 1 {
				verb = operands[1].text
			}
		}
		if verb == "" || inList("status show list-units list-unit-files is-active is-enabled cat --status-all", verb) {
			f(low, name+" shows service status", "", name+" status")
			return
		}
		f(high, name+" "+verb+" starts, stops or changes system services", "manage services yourself", name+" "+verb)
	case name == "kill" || name == "pkill" || name == "killall":
		if len(args) > 0 && lastOf(args).text == "-1" || name == "kill" && indexOf(operands, "1") >= 0 {
			f(critical, "kills every process it can (or init)", "kill a specific process id", name+" -1")
			return
		}
		f(high, "terminates processes", "check which processes it matches", name)
	case remoteTools[name]:
		f(high, name+" connects to another machine and can copy data to or from it", "check the host and what is sent", name)
	case downloaders[name]:
		c.download(name, flags, args)
	case packageManagers[name]:
		c.packages(name, operands)
	case machineTools[name] != "":
		level := high
		if name == "crontab" && len(flags) == 1 && flags[0] == "-l" {
			level = low
		}
		f(level, name+" "+machineTools[name], "do it yourself", strings.TrimSpace(name+" "+strings.Join(flags, " ")))
	case name == "docker" || name == "podman" || name == "kubectl" || name == "helm" || name == "terraform":
		c.infra(name, flags, operands)
	case name == "mv" || name == "cp" || name == "ln" || name == "install" || name == "touch" || name == "mkdir" ||
		name == "tee" || name == "truncate" || name == "rsync":
		c.write(name, flags, operands)
	case name == "sed" && hasShort(flags, 'i', "--in-place"):
		c.write("sed -i", nil, operands[min(1, len(operands)):])
	case readOnly[name]:
		f(low, name+" only reads and prints", "", name)
	case builders[name]:
		c.build(name, flags, operands)
	case strings.HasPrefix(inv.words[0].text, "./") || strings.HasPrefix(inv.words[0].text, "../") || strings.Contains(inv.words[0].text, "/"):
		where := c.place(inv.words[0])
		if where == placeInside {
			f(medium, "runs the program "+inv.words[0].text+" from the workspace", "check what the script does", inv.words[0].text)
			return
		}
		f(medium, "runs the program "+inv.words[0].text, "check what it does", inv.words[0].text)
	default:
		f(medium, name+" is not a program the server knows", "check what it does before allowing it", name)
	}
}

// inList reports whether s is one of the space-separated words of list.
func inList(list, s string) bool {
	return s != "" && strings.Contains(" "+list+" ", " "+s+" ")
}

func indexOf(ws []word, s string) int {
	for i, w := range ws {
		if w.text == s {
			return i
		}
	}
	return -1
}

func lastOf(ws []word) word { return ws[len(ws)-1] }

func (c *classifier) remove(name string, flags []string, operands []word) {
	recursive := name == "rm" && hasShort(flags, 'r', "--recursive") || hasShort(flags, 'R')
	force := hasShort(flags, 'f', "--force")
	sig := name
	switch {
	case recursive && force:
		sig += " -rf"
	case recursive:
		sig += " -r"
	case force:
		sig += " -f"
	}
	add := func(level presenters.RiskLevel, reason, suggestion string) {
		c.add(finding{level: level, reason: reason, suggestion: suggestion, signature: sig, base: name})
	}
	for _, fl := range flags {
		if fl == "--no-preserve-root" {
			add(critical, "deletes with --no-preserve-root, which allows deleting the whole file system", "do not run it")
			return
		}
	}
	where, which := c.worst(operands)
	switch {
	case where == placeRoot || where == placeDisk:
		add(critical, "deletes "+which+": the whole file system or home directory", "do not run it; name the files to delete")
	case where == placeSystem:
		add(critical, "deletes system files ("+which+")", "do not delete system files from an agent")
	case where == placeOutside && recursive:
		add(critical, "recursively deletes "+which+", outside the workspace", "delete only inside the workspace")
	case where == placeOutside:
		add(high, "deletes "+which+", outside the workspace", "delete only inside the workspace")
	case recursive && where == placeUnknown:
		add(critical, "recursively deletes a path built from a variable ("+which+"); an empty variable deletes far more", "spell the path out")
	case recursive:
		add(high, "recursively deletes files and directories (not recoverable)", "check the paths; commit or back up first")
	case name == "shred":
		add(high, "overwrites files so they cannot be recovered", "check the files first")
	case where == placeUnknown:
		add(high, "deletes a file whose name depends on a variable ("+which+")", "spell the path out")
	case name == "rmdir":
		add(medium, "deletes empty directories in the workspace", "")
	default:
		add(medium, "deletes files in the workspace (not recoverable)", "check the files; commit first")
	}
}

// gitGlobalArgs are git options before the subcommand that take a value.
var gitGlobalArgs = map[string]bool{"-C": true, "-c": true, "--git-dir": true, "--work-tree": true, "--namespace": true}

var gitReadOnly = map[string]bool{
	"status": true, "log": true, "diff": true, "show": true, "blame": true, "rev-parse": true, "ls-files": true,
	"describe": true, "shortlog": true, "grep": true, "whatchanged": true, "cat-file": true, "ls-tree": true,
	"ls-remote": true, "version": true, "help": true, "rev-list": true, "name-rev": true, "show-ref": true,
	"for-each-ref": true, "merge-base": true, "count-objects": true, "check-ignore": true, "var": true,
}

func (c *classifier) git(args []word) {
	for len(args) > 0 && strings.HasPrefix(args[0].text, "-") {
		if gitGlobalArgs[args[0].text] && len(args) > 1 {
			args = args[1:]
		}
		args = args[1:]
	}
	if len(args) == 0 {
		c.add(finding{level: low, reason: "git only prints help", signature: "git", base: "git"})
		return
	}
	sub := args[0].text
	flags, operands := splitArgs(args[1:])
	sig := "git " + sub
	add := func(level presenters.RiskLevel, reason, suggestion, signature string) {
		c.add(finding{level: level, reason: reason, suggestion: suggestion, signature: signature, base: "git"})
	}
	has := func(names ...string) bool {
		for _, fl := range flags {
			for _, n := range names {
				if fl == n || strings.HasPrefix(fl, n+"=") {
					return true
				}
			}
		}
		return false
	}
	switch sub {
	case "push":
		forced := has("--force", "-f", "--force-with-lease", "--mirror", "--force-if-includes") || hasShort(flags, 'f')
		for _, o := range operands {
			if strings.HasPrefix(o.text, "+") {
				forced = true
			}
		}
		switch {
		case forced:
			add(high, "force-pushes: rewrites the remote branch's history and can destroy others' commits", "push to a new branch, or use --force-with-lease after checking", "git push --force")
		case has("--delete", "-d") || anyPrefix(operands, ":"):
			add(high, "deletes a remote branch or tag", "check the ref name", "git push --delete")
		default:
			add(medium, "publishes commits to a remote repository", "check the branch and remote", sig)
		}
	case "reset":
		if has("--hard", "--merge", "--keep") {
			add(high, "git reset --hard discards uncommitted changes (not recoverable)", "stash or commit first", "git reset --hard")
			return
		}
		add(medium, "moves the branch or unstages changes", "", sig)
	case "clean":
		if hasShort(flags, 'f', "--force") {
			add(high, "git clean deletes untracked files (not recoverable)", "run git clean -n first to see what it deletes", "git clean -f")
			return
		}
		add(low, "git clean without -f only lists", "", sig)
	case "checkout", "restore", "switch":
		if has("--force", "-f", "--discard-changes") || (sub == "checkout" && indexOf(operands, ".") >= 0) || (sub == "restore" && len(operands) > 0 && !has("--staged", "-S")) {
			add(high, "overwrites uncommitted changes in the working tree", "stash or commit first", sig+" --force")
			return
		}
		add(medium, "switches branches or restores files", "", sig)
	case "branch":
		if has("-D", "--delete", "-d") && has("--force", "-f", "-D") {
			add(high, "force-deletes a branch, with commits that may be merged nowhere", "check the branch is merged", "git branch -D")
			return
		}
		if len(operands) == 0 && !has("-m", "-M", "-c", "-C", "-d", "--delete", "-u", "--set-upstream-to") {
			add(low, "lists branches", "", sig)
			return
		}
		add(medium, "creates, renames or deletes a branch", "", sig)
	case "stash":
		if len(operands) > 0 && (operands[0].text == "drop" || operands[0].text == "clear") {
			add(high, "deletes stashed changes (not recoverable)", "check the stash list first", "git stash "+operands[0].text)
			return
		}
		if len(operands) > 0 && (operands[0].text == "list" || operands[0].text == "show") {
			add(low, "lists stashed changes", "", "git stash list")
			return
		}
		add(medium, "stashes or applies changes", "", sig)
	case "tag", "remote", "config":
		if len(operands) == 0 || (sub == "config" && has("--get", "--list", "-l", "--get-all")) || (sub == "remote" && len(operands) > 0 && operands[0].text == "show") {
			add(low, "lists "+sub+" settings", "", sig)
			return
		}
		add(medium, "changes git "+sub+"s", "", sig)
	case "reflog":
		if len(operands) > 0 && (operands[0].text == "expire" || operands[0].text == "delete") {
			add(high, "deletes reflog entries, the last way back to lost commits", "do not run it from an agent", "git reflog "+operands[0].text)
			return
		}
		add(low, "shows the reflog", "", sig)
	case "filter-branch", "filter-repo", "update-ref", "replace":
		add(high, "rewrites repository history or refs", "do it yourself after a backup", sig)
	case "gc", "prune":
		if has("--prune", "--aggressive") || sub == "prune" {
			add(high, "permanently removes unreachable commits", "do it yourself", sig)
			return
		}
		add(medium, "compacts the repository", "", sig)
	default:
		if gitReadOnly[sub] {
			add(low, "git "+sub+" only reads the repository", "", sig)
			return
		}
		add(medium, "git "+sub+" changes the repository or working tree", "", sig)
	}
}

func anyPrefix(ws []word, prefix string) bool {
	for _, w := range ws {
		if strings.HasPrefix(w.text, prefix) {
			return true
		}
	}
	return false
}

func (c *classifier) find(args []word, ctx context) {
	for i, a := range args {
		switch a.text {
		case "-delete":
			c.add(finding{level: high, reason: "find -delete deletes every file it matches", suggestion: "run it without -delete first to see the matches", signature: "find -delete", base: "find"})
			return
		case "-exec", "-execdir", "-ok", "-okdir":
			var inner []word
			for _, w := range args[i+1:] {
				if w.text == ";" || w.text == "+" {
					break
				}
				inner = append(inner, w)
			}
			inv := unwrap(inner)
			if len(inv.words) == 0 {
				break
			}
			before := len(c.findings)
			c.program(inv, ctx)
			floor := medium
			if b := inv.base(); b == "rm" || b == "shred" || b == "unlink" || b == "chmod" || b == "chown" {
				floor = high // applied to every file found
			}
			for j := before; j < len(c.findings); j++ {
				c.findings[j].level = atLeast(c.findings[j].level, floor)
				c.findings[j].reason = "runs for every file found: " + c.findings[j].reason
				c.findings[j].signature = "find -exec " + c.findings[j].signature
			}
			return
		case "-fprint", "-fprintf", "-fls":
			c.add(finding{level: medium, reason: "find writes its results to a file", signature: "find " + a.text, base: "find"})
			return
		}
	}
	c.add(finding{level: low, reason: "find only lists files", signature: "find", base: "find"})
}

func (c *classifier) shell(name string, args []word, ctx context) {
	if i := indexOf(args, "-c"); i >= 0 {
		if i+1 < len(args) {
			if args[i+1].expands {
				// The outer shell expands the string before this one reads it as code.
				c.add(finding{level: high, reason: name + " -c runs shell code built when the line runs (" + args[i+1].text + ")",
					suggestion: "run the command directly", signature: name + " -c $var", base: name})
			}
			c.line(args[i+1].text, context{depth: ctx.depth + 1, escalated: ctx.escalated})
			return
		}
	}
	_, operands := splitArgs(args)
	if len(operands) == 0 {
		c.add(finding{level: medium, reason: name + " runs commands it reads from its input", suggestion: "check what it is given", signature: name, base: name})
		return
	}
	c.add(finding{level: medium, reason: name + " runs the script " + operands[0].text, suggestion: "read the script first", signature: name + " script", base: name})
}

func (c *classifier) permissions(name string, flags []string, operands []word) {
	recursive := hasShort(flags, 'R', "--recursive")
	targets := operands
	mode := ""
	if len(operands) > 0 {
		mode, targets = operands[0].text, operands[1:]
	}
	where, which := c.worst(targets)
	sig := name
	if recursive {
		sig += " -R"
	}
	worldWritable := name == "chmod" && (strings.HasSuffix(mode, "777") || strings.HasSuffix(mode, "666") ||
		strings.Contains(mode, "o+w") || strings.Contains(mode, "a+w") || strings.Contains(mode, "a+rwx") || mode == "+w")
	setuid := name == "chmod" && (strings.Contains(mode, "+s") || (len(mode) == 4 && mode[0] >= '2' && mode[0] <= '7'))
	if worldWritable {
		sig += " " + mode
	}
	add := func(level presenters.RiskLevel, reason, suggestion string) {
		c.add(finding{level: level, reason: reason, suggestion: suggestion, signature: sig, base: name})
	}
	switch {
	case where == placeRoot || where == placeSystem:
		add(critical, name+" changes ownership or permissions of system files ("+which+")", "do not change system files from an agent")
	case where == placeOutside:
		add(high, name+" changes files outside the workspace ("+which+")", "change only files in the workspace")
	case recursive && (worldWritable || name != "chmod"):
		add(high, name+" -R changes a whole tree ("+mode+")", "use the narrowest mode on the files that need it")
	case worldWritable:
		add(high, "makes files writable by every user ("+mode+")", "use 755/644 or u+x")
	case setuid:
		add(high, "sets the setuid/setgid bit: the program would run with its owner's rights", "do not set setuid from an agent")
	case where == placeUnknown:
		add(high, name+" changes a path built from a variable ("+which+")", "spell the path out")
	default:
		add(medium, name+" changes permissions of files in the workspace", "")
	}
}

func (c *classifier) dd(args []word) {
	for _, a := range args {
		if strings.HasPrefix(a.text, "of=") {
			target := word{text: strings.TrimPrefix(a.text, "of="), expands: a.expands}
			switch c.place(target) {
			case placeDisk:
				c.add(finding{level: critical, reason: "dd writes raw data onto the disk device " + target.text + ", destroying it", suggestion: "do not write to disk devices", signature: "dd of=/dev", base: "dd"})
				return
			case placeSystem, placeRoot:
				c.add(finding{level: critical, reason: "dd overwrites " + target.text, suggestion: "do not overwrite system files", signature: "dd of=" + target.text, base: "dd"})
				return
			case placeHarmless:
				c.add(finding{level: low, reason: "dd copies to " + target.text, signature: "dd", base: "dd"})
				return
			case placeOutside, placeUnknown:
				c.add(finding{level: high, reason: "dd overwrites " + target.text + ", outside the workspace", suggestion: "write inside the workspace", signature: "dd of", base: "dd"})
				return
			}
		}
	}
	c.add(finding{level: high, reason: "dd copies raw bytes and overwrites its target without asking", suggestion: "check if= and of=", signature: "dd", base: "dd"})
}

func (c *classifier) download(name string, flags []string, args []word) {
	for i, a := range args {
		switch {
		case a.text == "-T" || a.text == "--upload-file" || strings.HasPrefix(a.text, "--post-file") ||
			((a.text == "-d" || a.text == "--data" || a.text == "--data-binary" || a.text == "-F" || a.text == "--form") &&
				i+1 < len(args) && strings.Contains(args[i+1].text, "@")):
			c.add(finding{level: high, reason: name + " uploads local files to a server", suggestion: "check what is sent and where", signature: name + " upload", base: name})
			return
		case (a.text == "-o" || a.text == "-O" || a.text == "--output" || a.text == "--output-document") && i+1 < len(args) && name == "curl" || (name == "wget" && a.text == "-O" && i+1 < len(args)):
			if w := c.place(args[i+1]); w == placeOutside || w == placeSystem || w == placeRoot {
				c.add(finding{level: high, reason: name + " saves a download outside the workspace (" + args[i+1].text + ")", suggestion: "save it inside the workspace", signature: name + " -o outside", base: name})
				return
			}
		}
	}
	c.add(finding{level: medium, reason: name + " downloads from the network", suggestion: "check the URL", signature: name, base: name})
}

func (c *classifier) packages(name string, operands []word) {
	sub := ""
	if len(operands) > 0 {
		sub = operands[0].text
	}
	switch sub {
	case "list", "search", "show", "info", "policy", "--version", "-v", "-l", "-q", "query":
		c.add(finding{level: low, reason: name + " " + sub + " only queries packages", signature: name + " " + sub, base: name})
	case "update", "upgrade", "install", "remove", "purge", "autoremove", "erase", "uninstall", "-i", "-r", "-S", "-R", "-U", "-P", "add", "del":
		c.add(finding{level: high, reason: name + " " + sub + " changes the software installed on the machine", suggestion: "install system packages yourself", signature: name + " " + sub, base: name})
	default:
		c.add(finding{level: medium, reason: name + " manages system packages", suggestion: "check what it changes", signature: name + " " + sub, base: name})
	}
}

func (c *classifier) infra(name string, flags []string, operands []word) {
	sub := ""
	if len(operands) > 0 {
		sub = operands[0].text
	}
	sig := name + " " + sub
	destructive := map[string]bool{"rm": true, "rmi": true, "prune": true, "kill": true, "delete": true, "destroy": true,
		"uninstall": true, "drain": true, "taint": true}
	readOnly := map[string]bool{"ps": true, "images": true, "logs": true, "inspect": true, "get": true, "describe": true,
		"version": true, "info": true, "plan": true, "show": true, "list": true, "ls": true, "status": true, "top": true,
		"validate": true, "fmt": true, "diff": true, "history": true, "explain": true, "config": false}
	switch {
	case destructive[sub] || (len(operands) > 1 && destructive[operands[1].text]) || (name == "terraform" && sub == "apply" && hasShort(flags, 'x', "-destroy")):
		c.add(finding{level: high, reason: name + " " + sub + " deletes containers, images, resources or infrastructure", suggestion: "check what it removes", signature: sig, base: name})
	case name == "docker" || name == "podman":
		for _, fl := range flags {
			if fl == "--privileged" || strings.HasPrefix(fl, "--pid=host") || strings.HasPrefix(fl, "--net=host") || strings.HasPrefix(fl, "--network=host") {
				c.add(finding{level: high, reason: "runs a container with host privileges (" + fl + ")", suggestion: "run it without host privileges", signature: sig + " " + fl, base: name})
				return
			}
		}
		if readOnly[sub] {
			c.add(finding{level: low, reason: name + " " + sub + " only reads", signature: sig, base: name})
			return
		}
		c.add(finding{level: medium, reason: name + " " + sub + " builds or runs containers", suggestion: "check the image and mounts", signature: sig, base: name})
	case readOnly[sub]:
		c.add(finding{level: low, reason: name + " " + sub + " only reads", signature: sig, base: name})
	case name == "terraform" && sub == "apply", name == "kubectl" && (sub == "apply" || sub == "scale" || sub == "rollout" || sub == "patch" || sub == "replace" || sub == "exec"), name == "helm":
		c.add(finding{level: high, reason: name + " " + sub + " changes live infrastructure", suggestion: "review the plan and apply it yourself", signature: sig, base: name})
	default:
		c.add(finding{level: medium, reason: name + " " + sub + " works on infrastructure", suggestion: "check what it changes", signature: sig, base: name})
	}
}

// write classifies programs that create or change the files named in their operands.
func (c *classifier) write(name string, flags []string, operands []word) {
	targets := operands
	switch name {
	case "cp", "ln", "install", "rsync":
		if hasShort(flags, 't', "--target-directory") || len(operands) < 2 {
			break
		}
		targets = operands[len(operands)-1:]
	}
	where, which := c.worst(targets)
	sig := name
	if name == "cp" && hasShort(flags, 'r', "--recursive") || name == "cp" && hasShort(flags, 'R') {
		sig += " -r"
	}
	add := func(level presenters.RiskLevel, reason, suggestion string) {
		c.add(finding{level: level, reason: reason, suggestion: suggestion, signature: sig, base: strings.Fields(name)[0]})
	}
	switch where {
	case placeRoot, placeSystem, placeDisk:
		add(critical, name+" changes system files ("+which+")", "do not change system files from an agent")
	case placeOutside:
		add(high, name+" writes "+which+", outside the workspace", "write inside the workspace instead")
	case placeUnknown:
		add(medium, name+" writes a path built from a variable ("+which+")", "spell the path out")
	default:
		if name == "tee" && len(targets) == 0 {
			add(low, "tee only prints", "")
			return
		}
		add(medium, name+" creates or changes files in the workspace", "")
	}
}

func (c *classifier) build(name string, flags []string, operands []word) {
	sub := ""
	if len(operands) > 0 {
		sub = operands[0].text
	}
	sig := name
	switch name {
	case "go", "cargo", "npm", "yarn", "pnpm", "bun", "pip", "pip3", "uv", "poetry", "gem", "bundle", "dotnet", "mix", "composer", "swift", "stack", "cabal", "deno", "zig", "buf":
		sig = strings.TrimSpace(name + " " + sub)
		if publishSubcommands[sub] {
			c.add(finding{level: high, reason: sig + " publishes a package to a public registry", suggestion: "publish yourself after review", signature: sig, base: name})
			return
		}
		if (name == "go" && (sub == "version" || sub == "env" || sub == "list" || sub == "doc")) ||
			(name == "npm" || name == "pnpm" || name == "yarn") && (sub == "ls" || sub == "list" || sub == "view" || sub == "outdated") ||
			(name == "pip" || name == "pip3") && (sub == "list" || sub == "show" || sub == "freeze") ||
			(name == "cargo" && (sub == "tree" || sub == "metadata")) {
			c.add(finding{level: low, reason: sig + " only reads", signature: sig, base: name})
			return
		}
		if (name == "npm" || name == "pnpm" || name == "yarn" || name == "pip" || name == "pip3") && hasShort(flags, 'g', "--global") ||
			(name == "pip" || name == "pip3") && hasShort(flags, 0, "--user") {
			c.add(finding{level: high, reason: sig + " installs packages for the whole machine", suggestion: "install into the project instead", signature: sig + " -g", base: name})
			return
		}
	}
	for _, fl := range flags {
		if fl == "--version" || fl == "-V" && name != "gcc" || fl == "-h" || fl == "--help" {
			c.add(finding{level: low, reason: name + " only prints its version or help", signature: name + " " + fl, base: name})
			return
		}
	}
	reason := name + " builds, tests or runs project code"
	switch {
	case name == "tar" || name == "unzip" || name == "gzip" || name == "gunzip" || name == "xz" || name == "zip":
		reason = name + " packs or unpacks files"
	case name == "sed" || name == "patch":
		reason = name + " edits files"
	case name == "source" || name == ".":
		reason = "runs a shell script in the current shell"
	}
	c.add(finding{level: medium, reason: reason, suggestion: "check what it runs", signature: sig, base: name})
}

// inlineInterpreters are the interpreters that take a program on the command line: the
// options that give it, and the options that take the next word as their value.
var inlineInterpreters = []struct {
	names  []string
	code   map[string]string // option -> how the signature names it
	valued string            // space-separated options whose value is the next word
	// clusters: single-letter options may be bundled (perl -lne): letters that give
	// code, and letters that take the rest of the word as their value.
	clusterCode, clusterValued string
}{
	{names: []string{"python", "python2", "python3", "pypy", "pypy3"}, code: map[string]string{"-c": "-c"}, valued: "-W -X -Q",
		clusterCode: "c", clusterValued: "WXQm"},
	{names: []string{"perl"}, code: map[string]string{"-e": "-e", "-E": "-e"}, valued: "-I -M -m",
		clusterCode: "eE", clusterValued: "IMmixC0dDV"},
	{names: []string{"ruby"}, code: map[string]string{"-e": "-e"}, valued: "-I -r -C -E",
		clusterCode: "e", clusterValued: "IrCExFKT0"},
	{names: []string{"node", "nodejs", "bun"}, code: map[string]string{"-e": "-e", "--eval": "-e", "-p": "-p", "--print": "-p"},
		valued: "-r --require --import --loader -C --conditions --input-type", clusterCode: "ep", clusterValued: "rC"},
	{names: []string{"deno"}, code: map[string]string{"eval": "eval"}},
	{names: []string{"php"}, code: map[string]string{"-r": "-r", "-R": "-r", "-B": "-r", "-E": "-r"}, valued: "-c -d -z"},
	{names: []string{"lua", "luajit", "Rscript", "julia", "osascript"}, code: map[string]string{"-e": "-e"}},
}

// inlineCodeFlag returns how an interpreter is given its program on the command line
// ("-c" for python3 -c CODE), or "" when it runs a script, a module or its input.
func inlineCodeFlag(name string, args []word) string {
	if strings.HasPrefix(name, "python3.") {
		name = "python3"
	}
	for _, in := range inlineInterpreters {
		if !slices.Contains(in.names, name) {
			continue
		}
		for i := 0; i < len(args); i++ {
			a := args[i].text
			opt, _, _ := strings.Cut(a, "=")
			if sig, ok := in.code[opt]; ok {
				return sig
			}
			if a == "--" || a == "-" || !strings.HasPrefix(a, "-") && in.code[a] == "" {
				return "" // the script (or module, or stdin) and its own arguments follow
			}
			if in.valued != "" && inList(in.valued, a) {
				i++
				continue
			}
			if in.clusterCode != "" && !strings.HasPrefix(a, "--") {
				for _, letter := range a[1:] {
					if strings.ContainsRune(in.clusterCode, letter) {
						return in.code["-"+string(letter)]
					}
					if strings.ContainsRune(in.clusterValued, letter) {
						break
					}
				}
			}
		}
		return ""
	}
	return ""
}
