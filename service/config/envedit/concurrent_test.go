package envedit

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/clusterapp/clusterapp/service/config/envfile"
)

// Edits of one file at once (two operators, two commands) each read the
// file, change their line and rename the result over it: without a lock
// the later rename dropped the earlier edit, silently.
func TestSetFileConcurrentEditsAllLand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clusterapp.env")
	if err := os.WriteFile(path, []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const editors = 16
	var wg sync.WaitGroup
	for i := range editors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := SetFile(path, fmt.Sprintf("KEY_%d", i), "v"); err != nil {
				t.Errorf("edit %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	f, err := envfile.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := envfile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	vars := parsed.Vars()
	for i := range editors {
		if _, ok := vars[fmt.Sprintf("KEY_%d", i)]; !ok {
			t.Errorf("KEY_%d lost: %d of %d edits in the file:\n%s", i, len(vars), editors, f)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A file written by another program between the read and the rename is
// not replaced by an edit of its old text; the temporary file goes.
func TestReplaceRefusesAFileChangedMeanwhile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clusterapp.env")
	if err := os.WriteFile(path, []byte("THEIRS=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := replace(path, []byte("MINE=1\n"), nil, func() bool { return false })
	if b, _ := os.ReadFile(path); err != errChanged || string(b) != "THEIRS=1\n" {
		t.Fatalf("got %v, file %q; want errChanged and the file untouched", err, b)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
