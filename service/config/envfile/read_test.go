package envfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A FIFO, a directory or a device is named, not read: a FIFO used to block
// the reader until something wrote to it.
func TestReadFileRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.env")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "a FIFO", dir: "a directory", "/dev/null": "a device"} {
		_, err := ReadFile(path)
		if err == nil || !strings.Contains(err.Error(), want+", not a regular file") || !strings.Contains(err.Error(), path) {
			t.Errorf("ReadFile(%s) = %v, want an error naming %q", path, err, want)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.env")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
	file := filepath.Join(dir, "clusterapp.env")
	if err := os.WriteFile(file, []byte("A=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.env")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(link); err != nil || string(b) != "A=1\n" {
		t.Errorf("through a symbolic link: %q, %v", b, err)
	}
}
