// Package envedit changes one variable of an environment file in place,
// the way an operator would with an editor: every other byte (comments,
// blank lines, other variables, their order) is kept.
//
// The file is read exactly as systemd reads it (package envfile), so the
// edit lands on the assignment systemd applies: the last one of the key,
// even when it spans continuation lines, and never a line that only looks
// like an assignment because the line above continues into it. When the key
// is not assigned, the new line goes right after a commented-out template
// line ("#KEY=..." as `clusterapp config --env-template` writes them) or,
// failing that, at the end. The value is written by envfile.Line, quoted
// when it needs to be.
//
// Every edit is checked before anything is written: the new text, parsed
// again, must set the key to the value and every other variable exactly as
// before. SetFile then replaces the file atomically and durably: it follows
// a symbolic link to the real file (a dangling one too: Target), writes a temporary file beside it with
// the same owner, group and mode, fsyncs it, renames it over the original
// and fsyncs the directory, so a generator or a worker never reads half a
// file and a crash never leaves an empty one. Edits through SetFile take
// turns (an flock on the file's directory, held from the read to the
// rename): two at once used to read the same file, and the second rename
// dropped the first edit. An editor that does not take the lock (vi, a
// configuration manager) is caught if it writes between the read and the
// rename, and the edit is made again on its file.
package envedit

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/clusterapp/clusterapp/service/config/envfile"
)

// Set returns text with key assigned value.
func Set(text, key, value string) (string, error) {
	line, err := envfile.Line(key, value)
	if err != nil {
		return "", fmt.Errorf("set %s: %w", key, err)
	}
	before, err := envfile.Parse([]byte(text))
	if err != nil {
		return "", fmt.Errorf("set %s: the file as it is: %w", key, err)
	}
	want := before.Vars()
	want[key] = value
	var tried []string
	for _, candidate := range candidates(text, before, key, line) {
		if why := check(candidate, want); why != "" {
			tried = append(tried, why)
			continue
		}
		return candidate, nil
	}
	return "", fmt.Errorf("set %s: no safe place for the new line (%s); edit the file by hand", key, strings.Join(tried, "; "))
}

// candidates are the edits to try, best first: replace the assignment in
// effect; else insert after the template line; else append.
func candidates(text string, f *envfile.File, key, line string) []string {
	if a, ok := f.Last(key); ok {
		return []string{text[:a.Start] + line + text[a.End:]}
	}
	var out []string
	if i := templateLine(text, key); i >= 0 {
		out = append(out, text[:i]+line+"\n"+text[i:])
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return append(out, text+line+"\n")
}

// templateLine returns the offset just after the last "#KEY=" line, or -1.
func templateLine(text, key string) int {
	at := -1
	for off := 0; off < len(text); {
		end := strings.IndexByte(text[off:], '\n')
		if end < 0 {
			break // a last line without a newline: append instead
		}
		trimmed := strings.TrimSpace(text[off : off+end])
		if k, _, ok := strings.Cut(strings.TrimSpace(strings.TrimLeft(trimmed, "#")), "="); ok && strings.HasPrefix(trimmed, "#") && strings.TrimSpace(k) == key {
			at = off + end + 1
		}
		off += end + 1
	}
	return at
}

// check returns why candidate is not the intended edit, or "".
func check(candidate string, want map[string]string) string {
	after, err := envfile.Parse([]byte(candidate))
	if err != nil {
		return err.Error()
	}
	if got := after.Vars(); !maps.Equal(got, want) {
		return "the result would not read back as intended"
	}
	return ""
}

// SetFile applies Set to the file at path (following a symbolic link to the
// file itself, see Target), creating it (mode 0644, and its directory) when
// absent. It waits while another SetFile edits a file of the same directory.
func SetFile(path, key, value string) error {
	path, err := Target(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	for range maxTries {
		if err = setOnce(path, key, value); !errors.Is(err, errChanged) {
			return err
		}
	}
	return fmt.Errorf("%s: %w %d times in a row; try again", path, errChanged, maxTries)
}

// maxTries bounds the edits made again because the file changed meanwhile.
const maxTries = 3

// errChanged: another program wrote the file between the read and the rename.
var errChanged = errors.New("changed by another program during the edit")

func setOnce(path, key, value string) error {
	old, err := envfile.ReadFile(path)
	var st os.FileInfo
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	default:
		if st, err = os.Stat(path); err != nil {
			return fmt.Errorf("stat %s: %w", path, err)
		}
	}
	text, err := Set(string(old), key, value)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if string(old) == text && st != nil {
		return nil
	}
	return replace(path, []byte(text), st, func() bool {
		now, err := envfile.ReadFile(path)
		if st == nil {
			return errors.Is(err, fs.ErrNotExist)
		}
		return err == nil && string(now) == string(old)
	})
}

// lockDir takes an exclusive flock on dir, waiting for it, and returns its
// release. The directory, not the file: the file is replaced by a rename,
// so a lock on it would be on the old inode; and no lock file is left in
// the operator's /etc.
func lockDir(dir string) (func(), error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	for {
		err = syscall.Flock(int(d.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = d.Close() // the lock error is the one to report
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { _ = d.Close() }, nil // closing releases the lock; nothing was written through d
}

// maxLinks bounds a chain of symbolic links, as the kernel's 40 (ELOOP).
const maxLinks = 40

// Target returns the file an edit of path must write: path itself, or, when
// path is a symbolic link, the file the link names, followed through any
// further links, whether or not that file exists yet. A link is the
// operator's way of keeping the file elsewhere (a configuration repository,
// another volume), so an edit writes through it, as an editor or the
// shell's ">" does; renaming a new file over the link itself would quietly
// cut the file loose from where the operator keeps it. A link whose target
// is missing (dangling) is followed too, and the target created, as open(2)
// with O_CREAT does; but not into a directory that does not exist (an
// unmounted volume, a typo in the link), which is an error naming the link
// and its target. A loop of links is an error.
func Target(path string) (string, error) {
	link := path
	for hops := 0; ; hops++ {
		st, err := os.Lstat(link)
		if errors.Is(err, fs.ErrNotExist) {
			if link == path {
				return path, nil // SetFile creates it and its directory
			}
			if _, err := os.Stat(filepath.Dir(link)); err != nil {
				return "", fmt.Errorf("%s is a symbolic link to %s, whose directory cannot be used: %w", path, link, err)
			}
			return link, nil
		}
		if err != nil {
			return "", fmt.Errorf("stat %s: %w", link, err)
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			return link, nil
		}
		if hops == maxLinks {
			return "", fmt.Errorf("%s: too many levels of symbolic links", path)
		}
		next, err := os.Readlink(link)
		if err != nil {
			return "", fmt.Errorf("read link %s: %w", link, err)
		}
		if !filepath.IsAbs(next) {
			// Relative to the link's directory as the kernel finds it:
			// resolved first, so ".." in next climbs out of that real
			// directory, not out of a lexical path through other links.
			dir, err := filepath.EvalSymlinks(filepath.Dir(link))
			if err != nil {
				return "", fmt.Errorf("%s is a symbolic link to %s: %w", path, next, err)
			}
			next = filepath.Join(dir, next)
		}
		link = next
	}
}

// replace writes data to a temporary file beside path with the owner and
// mode of like (0644 and the caller's when nil), makes it durable and
// renames it over path, unless unchanged, asked right before the rename,
// says path is no longer what the edit was made on (errChanged).
func replace(path string, data []byte, like os.FileInfo, unchanged func() bool) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()           // may already be closed; the error that matters is err
			_ = os.Remove(tmp.Name()) // best effort: the original is untouched
		}
	}()
	mode := fs.FileMode(0o644)
	if like != nil {
		mode = like.Mode().Perm()
		if sys, ok := like.Sys().(*syscall.Stat_t); ok {
			if err := tmp.Chown(int(sys.Uid), int(sys.Gid)); err != nil {
				return fmt.Errorf("write %s: keep its owner: %w", path, err)
			}
		}
	}
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if !unchanged() {
		return errChanged
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
