package sandbox

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

func benchmarkRead(b *testing.B, size int) {
	tr := newTree(b, Options{})
	mustWrite(b, tr.wsDir+"/f.txt", benchText(size))
	b.SetBytes(int64(size))
	for b.Loop() {
		got, err := tr.ws.ReadTextFile("f.txt", ReadOptions{})
		if err != nil || len(got) != size {
			b.Fatalf("read %d bytes, %v", len(got), err)
		}
	}
}

func benchmarkWrite(b *testing.B, size int) {
	tr := newTree(b, Options{})
	content := benchText(size)
	b.SetBytes(int64(size))
	for b.Loop() {
		if err := tr.ws.WriteTextFile("dir/f.txt", content); err != nil {
			b.Fatal(err)
		}
	}
}

// benchText is size bytes of mixed-width UTF-8 text.
func benchText(size int) string {
	text := strings.ToValidUTF8(string(patternBytes("lorem ipsum dolor sit amet, é€😀\n", size-1)), "")
	return text + strings.Repeat("x", size-1-len(text)) + "\n"
}

func BenchmarkReadFile1KiB(b *testing.B)  { benchmarkRead(b, 1<<10) }
func BenchmarkReadFile1MiB(b *testing.B)  { benchmarkRead(b, 1<<20) }
func BenchmarkWriteFile1KiB(b *testing.B) { benchmarkWrite(b, 1<<10) }
func BenchmarkWriteFile1MiB(b *testing.B) { benchmarkWrite(b, 1<<20) }

// BenchmarkTerminalOutput measures how fast a terminal takes in output: a
// command writes 16 MiB of text through the pty into a 1 MiB buffer.
func BenchmarkTerminalOutput(b *testing.B) {
	tr := newTree(b, Options{})
	terms := tr.ws.NewTerminals()
	defer terms.Close()
	const total = 16 << 20
	b.SetBytes(total)
	for b.Loop() {
		id, err := terms.Create(context.Background(), TerminalSpec{
			Command: mainBinary(),
			Args:    []string{"lorem ipsum dolor sit amet, é€😀\n", strconv.Itoa(total), "65536"},
			Env:     map[string]string{helperEnv: "emit"},
		})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := terms.WaitForExit(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		out, err := terms.Output(id)
		if err != nil || !out.Truncated || len(out.Output) < (1<<20)-3 {
			b.Fatalf("kept %d bytes, truncated %v, %v", len(out.Output), out.Truncated, err)
		}
		if err := terms.Release(id); err != nil {
			b.Fatal(err)
		}
	}
}
