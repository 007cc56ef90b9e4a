package main

import (
	"os"
	"testing"
)

// processCPU reads this process's CPU time, which grows while it works.
func TestProcessCPUGrows(t *testing.T) {
	first, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for {
		for i := range 1_000_000 {
			x ^= i
		}
		now, err := processCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now > first {
			return
		}
		if now < first {
			t.Fatalf("CPU time went down: %v, then %v", first, now)
		}
	}
}
