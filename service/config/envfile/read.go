package envfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ReadFile reads the environment file at path (following symbolic links,
// as systemd does). Only a regular file is read: it is opened without
// blocking and checked before any read, so a FIFO, a device or a
// directory at the path is an error naming what is there, where
// os.ReadFile on a FIFO waited for a writer forever (`config --check`, and
// the generator until systemd's time limit for generators killed it).
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%s, not a regular file", kind(st.Mode()))}
	}
	return io.ReadAll(f)
}

// kind names a non-regular file's type.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}
