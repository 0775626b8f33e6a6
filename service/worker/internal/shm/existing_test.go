package shm

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// OpenExisting adds to the table a worker built, and creates, replaces and
// removes nothing: no table is fs.ErrNotExist, a spoilt one an error with
// the file left as it was.
func TestOpenExistingNeverBuilds(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenExisting(dir, small); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no table yet: %v, want fs.ErrNotExist", err)
	}
	if got := list(t, dir); got != "" {
		t.Fatalf("OpenExisting left %s", got)
	}

	w := open(t, dir, small) // the worker's
	defer w.Close()
	r, err := OpenExisting(dir, small)
	if err != nil {
		t.Fatal(err)
	}
	atomic.AddUint64(&r.Words()[3], 1)
	r.Close()
	if got := atomic.LoadUint64(&w.Words()[3]); got != 1 {
		t.Fatalf("the worker reads %d, want the 1 added through OpenExisting", got)
	}

	path := filepath.Join(dir, small.FileName())
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExisting(dir, small); err == nil || !strings.Contains(err.Error(), "bytes, want") {
		t.Fatalf("a truncated table: %v, want an error saying so", err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 100 {
		t.Fatalf("the truncated file was touched: %v %v", st, err)
	}
}

// In a directory the workers can write, only their own plain file is
// taken: not a symbolic link, not a second name of another file.
func TestOpenExistingRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	elsewhere := t.TempDir()
	w := open(t, elsewhere, small)
	defer w.Close()
	target := filepath.Join(elsewhere, small.FileName())
	path := filepath.Join(dir, small.FileName())
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExisting(dir, small); err == nil {
		t.Fatal("a symbolic link to a table was opened")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExisting(dir, small); err == nil || !strings.Contains(err.Error(), "2 links") {
		t.Fatalf("a hard link to a table: %v, want a refusal naming the links", err)
	}
}

// A file in the directory that is not its owner's is refused: the workers'
// runtime directory is theirs, and `exited` runs as root.
func TestOpenExistingRefusesAnotherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	dir := t.TempDir()
	w := open(t, dir, small)
	defer w.Close()
	if err := os.Chown(filepath.Join(dir, small.FileName()), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExisting(dir, small); err == nil || !strings.Contains(err.Error(), "uid 65534") {
		t.Fatalf("a table owned by another user: %v, want a refusal naming its owner", err)
	}
}
