package shm

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestTwoMappingsShareWords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r")
	a, err := Open(path, 42, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(path, 42, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	atomic.AddUint64(&a.Words()[3], 7)
	if got := atomic.LoadUint64(&b.Words()[3]); got != 7 {
		t.Fatalf("second mapping reads %d, want 7", got)
	}
	if _, err := Open(path, 42, 16); err == nil || !strings.Contains(err.Error(), "other settings") {
		t.Fatalf("another size: %v", err)
	}
	if _, err := Open(path, 43, 8); err == nil || !strings.Contains(err.Error(), "another layout") {
		t.Fatalf("another magic: %v", err)
	}
}
