package shm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// OpenExisting maps the table file for l in dir read-write, for a process
// that must add to a table without ever creating, replacing or removing one:
// `clusterapp-worker exited`, which the worker unit runs after the worker's process
// ends with full privileges (ExecStopPost=+), so that its exec skips the
// unit's namespace set-up. A file it built would be root's and unusable by
// the workers; so it takes the file as it finds it, and only a regular file
// owned by the owner of dir (the units' dynamic user, who owns the runtime
// directory): anything else in a directory the workers can write is refused.
// fs.ErrNotExist when no worker has built the table yet. It takes the
// shared lock a mapping holds (mapFile), so no worker removes the file under
// it.
func OpenExisting(dir string, l Layout) (*Region, error) {
	dst, err := os.Stat(dir)
	if err != nil {
		return nil, err // an *fs.PathError, naming dir
	}
	path := filepath.Join(dir, l.FileName())
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err // an *fs.PathError, naming the file
	}
	refuse := func(problem string) (*Region, error) {
		_ = f.Close() // nothing written
		return nil, &fs.PathError{Op: "open", Path: path, Err: errors.New(problem)}
	}
	st, err := f.Stat()
	if err != nil {
		return refuse("stat: " + err.Error())
	}
	fileSys, ok1 := st.Sys().(*syscall.Stat_t)
	dirSys, ok2 := dst.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 || fileSys.Uid != dirSys.Uid || fileSys.Nlink != 1 {
		return refuse(fmt.Sprintf("not a table of the directory's owner (uid %d): uid %d, %d links", dirSys.Uid, fileSys.Uid, fileSys.Nlink))
	}
	if problem := fileProblem(f, l); problem != "" {
		return refuse(problem)
	}
	r, err := mapFile(f, path, l)
	if err != nil {
		_ = f.Close() // already failing
		return nil, err
	}
	return r, nil
}
