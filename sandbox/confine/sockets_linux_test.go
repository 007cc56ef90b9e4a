package confine

import (
	"slices"
	"testing"
)

// socketPaths reads the absolute paths from /proc/net/unix's padded columns, paths with
// spaces included, each once, leaving out abstract, unbound and relative ones.
func TestSocketPaths(t *testing.T) {
	list := "Num       RefCount Protocol Flags    Type St Inode Path\n" +
		"0000000035e3cbdf: 00000003 00000000 00000000 0001 03  1219\n" +
		"00000000bfa9af35: 00000002 00000000 00010000 0001 01 18133 /run/user/1000/bus\n" +
		"0000000012345678: 00000003 00000000 00000000 0001 03 18140 /run/user/1000/bus\n" +
		"00000000deadbeef: 00000002 00000000 00010000 0001 01  9001 @/tmp/.X11-unix/X0\n" +
		"00000000cafebabe: 00000002 00000000 00010000 0001 01 123456 /tmp/my dir/with space.sock\n" +
		"00000000feedface: 00000002 00000000 00010000 0005 01   77 relative.sock\n"
	got := socketPaths([]byte(list))
	want := []string{"/run/user/1000/bus", "/tmp/my dir/with space.sock"}
	if !slices.Equal(got, want) {
		t.Fatalf("socketPaths = %q, want %q", got, want)
	}
}
