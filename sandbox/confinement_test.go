package sandbox

import (
	"context"
	"fmt"
	"github.com/agenticd/agenticd/internal/unprivileged"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/agenticd/agenticd/sandbox/confine"
)

// requireConfinement skips where the kernel cannot confine at all; this machine kind can,
// so there the tests below run.
func requireConfinement(t *testing.T) {
	t.Helper()
	if missing := confine.Probe().Missing(); len(missing) > 0 {
		t.Skipf("this kernel cannot confine: %s", strings.Join(missing, "; "))
	}
}

// agenticdFiles are a data dir and a config file beside the workspace root, as
// agenticd's own files are kept out of every workspace.
type agenticdFiles struct{ data, config string }

func newAgenticdFiles(t *testing.T, base string) agenticdFiles {
	t.Helper()
	f := agenticdFiles{data: filepath.Join(base, "data"), config: filepath.Join(base, "agenticd.yaml")}
	if err := os.MkdirAll(f.data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.data, "agenticd.db"), []byte("the database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.config, []byte("token: s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// shell runs a shell line in a terminal of terms and returns its output and exit code.
func shell(t *testing.T, terms *Terminals, line string) (string, int) {
	t.Helper()
	out, st := runToExit(t, terms, TerminalSpec{Command: line})
	if st.Code == nil {
		t.Fatalf("%q ended by signal %s", line, st.Signal)
	}
	return out.Output, *st.Code
}

// With every permission allowed, a command in a confined terminal still cannot read
// agenticd's files or anything outside its workspace and the system, nor write outside
// its workspace and private temp dir. The same commands unconfined succeed, so each
// refusal is the boundary's.
func TestConfinedTerminalStaysInItsWorkspace(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	attacks := func(tr *testTree, f agenticdFiles) []string {
		return []string{
			"cat " + f.config,
			"ls " + f.data,
			"cat " + filepath.Join(f.data, "agenticd.db"),
			"touch " + filepath.Join(f.data, "planted"),
			"cat " + filepath.Join(tr.outside, "secret.txt"),
			"echo x > " + filepath.Join(tr.outside, "written"),
			"echo x > " + filepath.Join(tr.rootDir, "other-workspace-file"),
		}
	}
	for _, mode := range []ConfinementMode{ConfineOff, ConfineOn} {
		t.Run(string(mode), func(t *testing.T) {
			base, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			f := newAgenticdFiles(t, base)
			tr, terms := newTerminals(t, Options{Confinement: mode, Excluded: []string{f.data, f.config}})
			for _, line := range attacks(tr, f) {
				out, code := shell(t, terms, line)
				if mode == ConfineOff && code != 0 {
					t.Errorf("unconfined %q failed (exit %d: %s); the confined run proves nothing", line, code, out)
				}
				if mode == ConfineOn && (code == 0 || strings.Contains(out, "s3cret") || strings.Contains(out, "the database")) {
					t.Errorf("confined %q succeeded (exit %d): %q", line, code, out)
				}
			}
			if mode == ConfineOff {
				return
			}
			// What it may do: write, rename and remove in its workspace and temp dir.
			out, code := shell(t, terms, `set -e; mkdir -p a b; echo made > a/f; mv a/f b/g; cat b/g; `+
				`echo tmp > "$TMPDIR/t"; cat "$TMPDIR/t"; cat /etc/hostname >/dev/null; echo ok`)
			if code != 0 || out != "made\ntmp\nok\n" {
				t.Errorf("work inside the workspace: exit %d, %q", code, out)
			}
			if _, err := os.Stat(filepath.Join(tr.wsDir, "b", "g")); err != nil {
				t.Errorf("the file written inside the workspace is not there: %v", err)
			}
		})
	}
}

// A confined command cannot read agenticd's environment through /proc: it sees only its
// own PID namespace.
func TestConfinedTerminalCannotReadTheServersEnvironment(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	// /proc/PID/environ is the environment a process was started with: stand in for
	// agenticd with a process started with a secret in it.
	server := exec.Command("sleep", "1000")
	server.Env = append(os.Environ(), "AGENTICD_TEST_SECRET=env-s3cret")
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = server.Process.Kill(); _ = server.Wait() }()
	line := fmt.Sprintf("cat /proc/%d/environ", server.Process.Pid)
	_, plain := newTerminals(t, Options{HiddenEnv: []string{"AGENTICD_TEST_SECRET"}})
	if out, _ := shell(t, plain, line); !strings.Contains(out, "env-s3cret") {
		t.Fatalf("unconfined, %q did not show the secret (%q); the confined run proves nothing", line, out)
	}
	_, terms := newTerminals(t, Options{Confinement: ConfineOn, HiddenEnv: []string{"AGENTICD_TEST_SECRET"}})
	if out, _ := shell(t, terms, line+"; cat /proc/*/environ"); strings.Contains(out, "env-s3cret") {
		t.Errorf("the confined command read the server's environment: %q", out)
	}
}

// Background processes a confined command starts (setsid, a double fork) end with it:
// when it exits, and when its terminal is killed.
func TestConfinedTerminalLeavesNothingBehind(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	_, terms := newTerminals(t, Options{Confinement: ConfineOn})
	marker := fmt.Sprintf("agenticd-orphan-%d-%d", os.Getpid(), time.Now().UnixNano())
	// Each background process is a shell named by the marker ($0), kept alive by a
	// second command so the shell does not exec sleep in its place.
	bg := fmt.Sprintf(`sh -c 'sleep 1000; :' %s`, marker)
	spawn := fmt.Sprintf(`setsid %[1]s & (%[1]s &) ; nohup %[1]s >/dev/null 2>&1 & sleep 0.2`, bg)
	if _, code := shell(t, terms, spawn); code != 0 {
		t.Fatalf("spawning exited %d", code)
	}
	eventually(t, "background processes of an exited command are gone", func() bool { return len(processesWith(marker)) == 0 })

	id, err := terms.Create(context.Background(), TerminalSpec{Command: spawn + "; sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second command's background processes started", func() bool { return len(processesWith(marker)) >= 3 })
	if err := terms.Kill(id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "background processes of a killed command are gone", func() bool { return len(processesWith(marker)) == 0 })
	if err := terms.Release(id); err != nil {
		t.Fatal(err)
	}
}

// processesWith lists the pids whose command line contains s.
func processesWith(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), s) && !processGone(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// A system directory holding one of agenticd's files stays readable but for that file.
func TestReadPathsCarveOutAgenticdsFiles(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join(base, "etc")
	for _, dir := range []string{"agenticd", "ssl", "apt"} {
		if err := os.MkdirAll(filepath.Join(etc, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"hosts", "agenticd/agenticd.yaml", "agenticd/README"} {
		if err := os.WriteFile(filepath.Join(etc, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{Excluded: []string{filepath.Join(etc, "agenticd", "agenticd.yaml")}}
	got := o.readPaths([]string{etc})
	for _, want := range []string{filepath.Join(etc, "hosts"), filepath.Join(etc, "ssl"), filepath.Join(etc, "apt"), filepath.Join(etc, "agenticd", "README"), "/usr"} {
		if !slices.Contains(got, want) {
			t.Errorf("read paths lack %s: %v", want, got)
		}
	}
	for _, p := range got {
		if p == etc || p == filepath.Join(etc, "agenticd") || strings.HasSuffix(p, "agenticd.yaml") {
			t.Errorf("read paths hold %s, which holds agenticd's config: %v", p, got)
		}
	}
}

// An agent installed with its own node (nvm) is a "#!/usr/bin/env node" script whose
// interpreter lives outside the system dirs: confined, the interpreter stays runnable.
func TestConfinedScriptFindsItsInterpreter(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	tr := newTree(t, Options{Confinement: ConfineOn})
	tr.plant(t)
	base := t.TempDir()
	bin := filepath.Join(t.TempDir(), "nvm", "bin") // apart from the agent's own dir
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// The "interpreter" is a copy of sh, so it runs the script below as a shell script.
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "mynode"), sh, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(base, "agent")
	if err := os.WriteFile(agent, []byte("#!/usr/bin/env mynode\necho interpreter ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(agent)
	cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")
	release, err := tr.roots.Confine(cmd, tr.wsDir, ProcessPaths{})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "interpreter ran\n" {
		t.Fatalf("confined script: %v, %q", err, out)
	}
}

// A terminal's command, arguments and PATH come from a request: naming a file as an
// argument (or as a script's interpreter) must not make it readable, as it does for an
// agent's own configured command.
func TestConfinedTerminalArgumentsOpenNothing(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	tr, terms := newTerminals(t, Options{Confinement: ConfineOn})
	secret := filepath.Join(tr.outside, "secret.txt")
	out, st := runToExit(t, terms, TerminalSpec{Command: "/bin/cat", Args: []string{secret}})
	if st.Code == nil || *st.Code == 0 || strings.Contains(out.Output, "TOP SECRET") {
		t.Errorf("cat %s as an argument: %s, %q", secret, st, out.Output)
	}
}

// The init starts with nothing but its marker in its environment: a variable from a
// request (LD_PRELOAD) reaches only the command, after the boundary is up.
func TestConfinedCommandGetsItsEnvironmentAndTheInitNone(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	tr := newTree(t, Options{Confinement: ConfineOn})
	cmd := exec.Command("/bin/sh", "-c", `echo "$GREETING"`)
	cmd.Env = append(os.Environ(), "GREETING=first", "GREETING=hello", "LD_PRELOAD=/nonexistent.so")
	release, err := tr.roots.Confine(cmd, tr.wsDir, ProcessPaths{})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if len(cmd.Env) != 1 || !strings.HasPrefix(cmd.Env[0], "AGENTICD_CONFINE_INIT=") {
		t.Fatalf("the init's environment holds %d variables: %.200q", len(cmd.Env), cmd.Env)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "hello\n") {
		t.Fatalf("the command's environment: %v, %q", err, out)
	}
}

// A command in a confined terminal (itself on a pty) cannot open the other terminals of
// agenticd's user, such as one the test holds open as agenticd or another session would:
// its /dev/pts is an instance of its own.
func TestConfinedTerminalCannotOpenOtherTerminals(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	line := fmt.Sprintf(`echo hijack > %s; echo open=$?; echo "pts: $(ls /dev/pts | tr '\n' ' ')"`, tty.Name())
	_, plain := newTerminals(t, Options{})
	if out, _ := shell(t, plain, line); !strings.Contains(out, "open=0") {
		t.Fatalf("unconfined, %s did not open (%q); the confined run proves nothing", tty.Name(), out)
	}
	_, terms := newTerminals(t, Options{Confinement: ConfineOn})
	out, _ := shell(t, terms, line)
	if strings.Contains(out, "open=0") {
		t.Errorf("confined, the command opened %s: %q", tty.Name(), out)
	}
	if !strings.Contains(out, "pts: ptmx \n") {
		t.Errorf("confined, /dev/pts shows more than a fresh instance: %q", out)
	}
}

// A command in a confined terminal cannot connect to a Unix socket bound outside the
// paths it may write (a session bus, docker.sock, an SSH agent stand here), while a
// socket in its workspace still answers.
func TestConfinedTerminalCannotReachUnixSocketsOutside(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("the attack is written in Python: %v", err)
	}
	tr, terms := newTerminals(t, Options{Confinement: ConfineOn})
	outside := filepath.Join(tr.outside, "agent.sock")
	inside := filepath.Join(tr.wsDir, "dev.sock")
	for _, path := range []string{outside, inside} {
		serveUnix(t, path)
	}
	connect := func(terms *Terminals, path string) string {
		out, _ := shell(t, terms, fmt.Sprintf(`%s -I -S -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
print(s.recv(100).decode().strip())' %s; echo exit=$?`, python, path))
		return out
	}
	_, plain := newTerminals(t, Options{})
	if out := connect(plain, outside); !strings.Contains(out, "greetings from agent.sock") {
		t.Fatalf("unconfined, %s did not answer (%q); the confined run proves nothing", outside, out)
	}
	// The traceback names line 3: connect failed, not Python's start.
	if out := connect(terms, outside); strings.Contains(out, "greetings") || !strings.Contains(out, "line 3, in <module>") {
		t.Errorf("confined, the command reached %s, or failed before connecting: %q", outside, out)
	}
	if out := connect(terms, inside); !strings.Contains(out, "greetings from dev.sock") {
		t.Errorf("confined, the socket in the workspace did not answer: %q", out)
	}
}

// An agent's own process gets agenticd's environment without agenticd's variables
// (AGENTICD_*) and without the keys any agent names by api_key_env (HiddenEnv), unless
// the agent's own env sets them or they are its own keys (keep); its own env entries
// reach it.
func TestAgentEnvHidesServerSecrets(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	t.Setenv("AGENTICD_TOKEN", "token-s3cret")
	t.Setenv("AGENTICD_SOMETHING", "server-s3cret")
	t.Setenv("SANDBOX_TEST_OTHER_KEY", "other-key-s3cret")
	t.Setenv("SANDBOX_TEST_OWN_KEY", "server-copy-s3cret")
	t.Setenv("SANDBOX_TEST_VISIBLE", "shown")
	t.Setenv("SANDBOX_TEST_KEPT_KEY", "kept")
	tr := newTree(t, Options{Confinement: ConfineOn, HiddenEnv: []string{"SANDBOX_TEST_OTHER_KEY", "SANDBOX_TEST_OWN_KEY", "SANDBOX_TEST_KEPT_KEY"}})
	cmd := exec.Command("/bin/sh", "-c", "tr '\\0' '\\n' </proc/self/environ")
	cmd.Env = tr.roots.AgentEnv(map[string]string{"SANDBOX_TEST_OWN_KEY": "configured", "SANDBOX_TEST_ADDED": "added"}, []string{"SANDBOX_TEST_KEPT_KEY"})
	release, err := tr.roots.Confine(cmd, tr.wsDir, ProcessPaths{})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SANDBOX_TEST_VISIBLE=shown", "SANDBOX_TEST_OWN_KEY=configured", "SANDBOX_TEST_ADDED=added", "SANDBOX_TEST_KEPT_KEY=kept"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("the agent's environment lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "s3cret") || strings.Contains(string(out), "AGENTICD_") {
		t.Errorf("the agent's environment holds a secret of agenticd's:\n%s", out)
	}
}
