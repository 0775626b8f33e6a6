package main

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Ctrl-C (SIGINT) to a command changing the pool cancels its context with
// the signal named, and says so; the process lives on to finish the job
// in progress.
func TestInterruptibleNamesTheSignal(t *testing.T) {
	var out bytes.Buffer
	ctx, stop := interruptible(context.Background(), &out)
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGINT did not cancel the context")
	}
	if cause := context.Cause(ctx); cause == nil || cause.Error() != "interrupted by SIGINT" {
		t.Errorf("cause %v, want interrupted by SIGINT", cause)
	}
	if !strings.HasPrefix(out.String(), "interrupted by SIGINT: finishing the job in progress") {
		t.Errorf("said %q", out.String())
	}
}
