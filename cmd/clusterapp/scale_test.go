package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scale writes through a symbolic link at the scale file, a dangling one
// too: the file it names is created with the header, the link stays.
func TestWriteScaleFileThroughADanglingLink(t *testing.T) {
	dir := t.TempDir()
	real, path := filepath.Join(dir, "kept.env"), filepath.Join(dir, "scale.env")
	if err := os.Symlink("kept.env", path); err != nil {
		t.Fatal(err)
	}
	if err := writeScaleFile(path, 3); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v", err)
	}
	b, err := os.ReadFile(real)
	if err != nil || !strings.HasPrefix(string(b), scaleHeader) || !strings.HasSuffix(string(b), "\nCLUSTERAPP_WORKERS=3\n") {
		t.Fatalf("target: %q, %v", b, err)
	}
}
