package confine_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/sandbox/confine"
)

func benchStart(b *testing.B, policy *confine.Policy) {
	for b.Loop() {
		cmd := exec.Command("/usr/bin/true")
		if policy != nil {
			if _, err := policy.Wrap(cmd); err != nil {
				b.Fatal(err)
			}
		}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStartConfined and BenchmarkStartPlain: start and wait for
// `true`, with and without the boundary.
func BenchmarkStartConfined(b *testing.B) {
	if missing := confine.Probe().Missing(); len(missing) > 0 {
		b.Skip(missing)
	}
	dir := b.TempDir()
	benchStart(b, &confine.Policy{ReadOnly: []string{"/usr", "/etc"}, ReadWrite: []string{dir}})
}

func BenchmarkStartPlain(b *testing.B) { benchStart(b, nil) }

// BenchmarkStartConfined100Sockets: as BenchmarkStartConfined with 100 more
// Unix sockets bound outside the command's paths (a desktop has about that
// many), each of which the init covers on kernels before Landlock ABI 9.
func BenchmarkStartConfined100Sockets(b *testing.B) {
	if missing := confine.Probe().Missing(); len(missing) > 0 {
		b.Skip(missing)
	}
	outside := b.TempDir()
	for i := range 100 {
		l, err := net.Listen("unix", filepath.Join(outside, fmt.Sprintf("s%d.sock", i)))
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
	}
	dir := b.TempDir()
	benchStart(b, &confine.Policy{ReadOnly: []string{"/usr", "/etc"}, ReadWrite: []string{dir}})
}

// BenchmarkInitRSS reports the memory the init holds while its command
// runs: anonymous (its own) and file-backed (the binary's pages, shared
// with the parent through the page cache).
func BenchmarkInitRSS(b *testing.B) {
	if missing := confine.Probe().Missing(); len(missing) > 0 {
		b.Skip(missing)
	}
	dir := b.TempDir()
	policy := confine.Policy{ReadOnly: []string{"/usr", "/etc"}, ReadWrite: []string{dir}}
	var anon, file float64
	n := 0
	for b.Loop() {
		cmd := exec.Command("/bin/sh", "-c", "echo ready; read line; exit 0")
		if _, err := policy.Wrap(cmd); err != nil {
			b.Fatal(err)
		}
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
			b.Fatalf("got %q", line)
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err != nil {
			b.Fatal(err)
		}
		anon += statusKiB(b, status, "RssAnon:")
		file += statusKiB(b, status, "RssFile:")
		n++
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(anon/float64(n), "anon-KiB")
	b.ReportMetric(file/float64(n), "file-KiB")
}

func statusKiB(b *testing.B, status []byte, field string) float64 {
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			var kib float64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kib); err != nil {
				b.Fatal(err)
			}
			return kib
		}
	}
	b.Fatalf("no %s in status", field)
	return 0
}
