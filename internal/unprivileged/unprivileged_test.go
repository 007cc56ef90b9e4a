package unprivileged_test

import (
	"os"
	"testing"

	"github.com/agenticd/agenticd/internal/unprivileged"
)

func TestReexecRunsAsOrdinaryUser(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	if os.Geteuid() == 0 {
		t.Fatal("the test body runs as root")
	}
	if got, want := os.Getuid(), unprivileged.User(t).UID; got != want {
		t.Fatalf("uid %d, want %d", got, want)
	}
	dir := unprivileged.Dir(t)
	if err := os.WriteFile(dir+"/x", []byte("x"), 0o600); err != nil {
		t.Fatalf("the ordinary user cannot write its own directory: %v", err)
	}
}
