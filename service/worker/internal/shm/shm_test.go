package shm

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

var small = Layout{Kind: "ratelimit", Version: 2, Size: 8, Words: 8}

func quiet() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

func open(t *testing.T, dir string, l Layout) *Region {
	t.Helper()
	r, err := Open(dir, l, quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestTwoMappingsShareWordsAndSecret(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, small), open(t, dir, small)
	atomic.AddUint64(&a.Words()[3], 7)
	if got := atomic.LoadUint64(&b.Words()[3]); got != 7 {
		t.Fatalf("second mapping reads %d, want 7", got)
	}
	if a.Secret() != b.Secret() || a.Secret() == [16]byte{} {
		t.Fatalf("secrets %x and %x: two mappings of one file must read the same, non-zero secret", a.Secret(), b.Secret())
	}
	if _, err := os.Stat(filepath.Join(dir, "ratelimit.v2.8.table")); err != nil {
		t.Fatalf("the file name carries kind, layout version and size: %v", err)
	}
	if c := open(t, t.TempDir(), small); c.Secret() == a.Secret() {
		t.Fatal("another table file got the same secret") // 2^-128 by chance
	}
}

// Workers starting together race to create the file: they must all end up
// on one file, or they would not share a budget (nor a secret).
func TestConcurrentOpensShareOneFile(t *testing.T) {
	dir := t.TempDir()
	regions := make([]*Region, 8)
	var wg sync.WaitGroup
	for i := range regions {
		wg.Go(func() {
			r, err := Open(dir, small, quiet())
			if err != nil {
				t.Error(err)
				return
			}
			regions[i] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, r := range regions {
		defer r.Close()
		if r.Secret() != regions[0].Secret() {
			t.Fatal("concurrent opens mapped different files")
		}
	}
	atomic.AddUint64(&regions[0].Words()[0], 1)
	if atomic.LoadUint64(&regions[7].Words()[0]) != 1 {
		t.Fatal("concurrent opens do not share words")
	}
}

// A table of another size lives in another file, so workers started with
// different settings (a rolling change of CLUSTERAPP_RATE_LIMIT_SLOTS) both
// run. Version 1 refused to start: "has 524304 bytes, want 8208 ... remove it".
func TestAnotherSizeIsAnotherFile(t *testing.T) {
	dir := t.TempDir()
	old := open(t, dir, Layout{Kind: "ratelimit", Version: 2, Size: 65536, Words: 65536})
	resized, err := Open(dir, Layout{Kind: "ratelimit", Version: 2, Size: 1024, Words: 1024}, quiet())
	if err != nil {
		t.Fatalf("a table of another size: %v", err)
	}
	defer resized.Close()
	if len(old.Words()) != 65536 || len(resized.Words()) != 1024 {
		t.Fatalf("sizes %d and %d", len(old.Words()), len(resized.Words()))
	}
}

// A file of the table's own name that is unusable is replaced by a fresh
// one, never a reason to stop; a process that still maps the old inode keeps
// it intact (it is renamed over, never truncated: a shrunk mapping is a
// SIGBUS).
func TestUnusableFileIsReplaced(t *testing.T) {
	size := int64(small.bytes())
	for _, tc := range []struct {
		name    string
		spoil   func(path string) error
		problem string
		// shrinks: the spoiling itself would fault a mapping (that is the
		// hazard), so it spoils a file nobody maps any more.
		shrinks bool
	}{
		{"truncated", func(p string) error { return os.Truncate(p, size/2) }, "bytes, want", true},
		{"emptied", func(p string) error { return os.Truncate(p, 0) }, "0 bytes, want", true},
		{"grown", func(p string) error { return os.Truncate(p, size*2) }, "bytes, want", false},
		{"another layout", func(p string) error { return writeAt(p, 0, "not our magic") }, "another layout", false},
		{"another word count", func(p string) error { return writeAt(p, 8, "\x09") }, "header says 9 words", false},
		{"no secret", func(p string) error { return writeAt(p, 16, strings.Repeat("\x00", 16)) }, "no secret", false},
		{"a symlink", func(p string) error { os.Remove(p); return os.Symlink("/dev/zero", p) }, "symbolic link", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, small.FileName())
			first := open(t, dir, small)
			atomic.StoreUint64(&first.Words()[1], 41)
			if tc.shrinks {
				first.Close()
			}
			if err := tc.spoil(path); err != nil {
				t.Fatal(err)
			}
			log, hook := logtest.NewNullLogger()
			r, err := Open(dir, small, logrus.NewEntry(log))
			if err != nil {
				t.Fatalf("an unusable table file stopped the worker: %v", err)
			}
			defer r.Close()
			if st, err := os.Lstat(path); err != nil || st.Size() != size || !st.Mode().IsRegular() {
				t.Fatalf("not replaced by a regular file of %d bytes: %v %v", size, st, err)
			}
			if atomic.LoadUint64(&r.Words()[1]) != 0 || r.Secret() == [16]byte{} {
				t.Fatal("the replacement is not a fresh table")
			}
			if e := hook.LastEntry(); e == nil || !strings.Contains(e.Data["problem"].(string), tc.problem) {
				t.Fatalf("log %v, want a warning naming the problem %q", hook.AllEntries(), tc.problem)
			}
			if first.Words() != nil {
				atomic.AddUint64(&first.Words()[1], 1) // the old mapping still works
				if got := atomic.LoadUint64(&first.Words()[1]); got != 42 {
					t.Fatalf("the old mapping reads %d, want 42", got)
				}
			}
		})
	}
}

func writeAt(path string, off int64, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt([]byte(s), off)
	return err
}

// Files of the same kind that no live process maps are removed; one a live
// worker maps is kept until it lets go.
func TestUnusedFilesAreRemoved(t *testing.T) {
	dir := t.TempDir()
	inUse := open(t, dir, Layout{Kind: "ratelimit", Version: 2, Size: 64, Words: 64})
	for _, name := range []string{"ratelimit.table", ".ratelimit.v2.9.table.tmp-0a1b2c", "balance.v2.1024.table", "config-failures.1"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	open(t, dir, Layout{Kind: "ratelimit", Version: 2, Size: 128, Words: 128})
	if got, want := list(t, dir), "balance.v2.1024.table config-failures.1 ratelimit.v2.128.table ratelimit.v2.64.table"; got != want {
		t.Fatalf("after the first cleanup: %s, want %s (the unused version-1 and temporary files gone, the mapped table and other kinds kept)", got, want)
	}
	inUse.Close()
	open(t, dir, Layout{Kind: "ratelimit", Version: 2, Size: 128, Words: 128})
	if got, want := list(t, dir), "balance.v2.1024.table config-failures.1 ratelimit.v2.128.table"; got != want {
		t.Fatalf("after the last user of the 64-slot table left: %s, want %s", got, want)
	}
}

func list(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

func TestMissingDirectoryIsAnError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	_, err := Open(dir, small, quiet())
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("a missing directory: %v, want an error naming it", err)
	}
}

// A region says when its file's name has gone (an operator's rm) or names
// another file (a table rebuilt by a worker started after): the processes
// that map the old file no longer share with the ones started after.
func TestDetachedWhenTheNameMovesOn(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, small)
	path := filepath.Join(dir, small.FileName())
	if why, err := a.Detached(); why != "" || err != nil {
		t.Fatalf("a fresh region: detached %q, %v", why, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if why, err := a.Detached(); why != path+" was removed" || err != nil {
		t.Errorf("after rm: detached %q, %v; want %q", why, err, path+" was removed")
	}
	b := open(t, dir, small) // the next worker builds the table afresh
	if why, _ := b.Detached(); why != "" {
		t.Errorf("the new region: detached %q", why)
	}
	if why, err := a.Detached(); why != path+" now names another file" || err != nil {
		t.Errorf("after a rebuild: detached %q, %v; want %q", why, err, path+" now names another file")
	}
	atomic.AddUint64(&a.Words()[0], 1)
	if atomic.LoadUint64(&b.Words()[0]) != 0 {
		t.Error("the old and the new file share words") // the split Detached reports
	}
	if why, err := Local(4).Detached(); why != "" || err != nil {
		t.Errorf("a local region: detached %q, %v", why, err)
	}
}
