// Package journal reads the workers' journal by running journalctl with
// JSON output and formatting each entry with the worker it came from.
//
// go-systemd's sdjournal would read the journal files directly, but it
// needs cgo and libsystemd at build time; journalctl is on every systemd
// host, already knows the journal's file layout and access rules, and its
// `-o json` output is a stable interface (one object per line). A worker's
// own lines carry _SYSTEMD_UNIT=clusterapp-worker@N.service; the service
// manager's lines about it ("Started ...", "Main process exited ...") carry
// UNIT= instead; `-u` matches both, and both are shown.
package journal

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
)

// Options select entries. The zero value is every worker's whole journal.
type Options struct {
	// Units to match; empty means every clusterapp worker.
	Units []string
	// Since is passed to journalctl --since ("-10m", "today", a date).
	Since string
	// Lines limits the output to the last entries (journalctl -n); 0 means no limit.
	Lines int
	// Follow keeps printing new entries until the context ends.
	Follow bool
}

// Args returns journalctl's arguments for opts.
func Args(opts Options) []string {
	args := []string{"--no-pager", "--quiet", "-o", "json"}
	units := opts.Units
	if len(units) == 0 {
		units = []string{config.WorkerPattern}
	}
	for _, u := range units {
		args = append(args, "-u", u)
	}
	if opts.Since != "" {
		args = append(args, "--since", opts.Since)
	}
	if opts.Lines > 0 {
		args = append(args, "-n", strconv.Itoa(opts.Lines))
	}
	if opts.Follow {
		args = append(args, "-f")
	}
	return args
}

// Entry is the part of a journal entry that is shown.
type Entry struct {
	Time    time.Time
	Unit    string // clusterapp-worker@N.service
	PID     string // empty for the service manager's own lines
	Message string
}

// Parse decodes one line of `journalctl -o json`.
func Parse(line []byte) (Entry, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return Entry{}, fmt.Errorf("parse journal entry: %w", err)
	}
	e := Entry{Message: message(raw["MESSAGE"])}
	if us, err := strconv.ParseInt(field(raw["__REALTIME_TIMESTAMP"]), 10, 64); err == nil {
		e.Time = time.UnixMicro(us)
	}
	if u := field(raw["_SYSTEMD_UNIT"]); config.IsWorkerUnit(u) {
		e.Unit, e.PID = u, field(raw["_PID"])
	} else {
		e.Unit = field(raw["UNIT"])
	}
	return e, nil
}

// field decodes a string field; journalctl writes non-UTF-8 or binary
// values as arrays of bytes, and repeated fields as arrays of those.
func field(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var b []byte
	var ints []int
	if json.Unmarshal(v, &ints) == nil {
		for _, i := range ints {
			b = append(b, byte(i))
		}
		return string(b)
	}
	return ""
}

func message(v json.RawMessage) string {
	return strings.TrimRight(field(v), "\n")
}

// Format prints an entry as "Jan _2 15:04:05.000 worker@N[PID]: message",
// or "worker@N (systemd): message" for the service manager's lines.
func (e Entry) Format() string {
	name := strings.TrimSuffix(strings.TrimPrefix(e.Unit, "clusterapp-"), ".service")
	who := name + " (systemd)"
	if e.PID != "" {
		who = name + "[" + e.PID + "]"
	}
	return e.Time.Format("Jan _2 15:04:05.000") + " " + who + ": " + e.Message
}

// Copy formats every entry journalctl prints for opts onto w, until
// journalctl exits or ctx ends (which is not an error: it is how -f stops).
func Copy(ctx context.Context, opts Options, w io.Writer) error {
	cmd := exec.CommandContext(ctx, "journalctl", Args(opts)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("journalctl: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("journalctl: %w", err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		e, err := Parse(sc.Bytes())
		if err != nil {
			continue // a torn line at the end of a killed journalctl
		}
		if _, err := fmt.Fprintln(w, e.Format()); err != nil {
			_ = cmd.Process.Kill() // the reader went away (e.g. a closed pipe)
			_ = cmd.Wait()
			return err
		}
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("journalctl: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Tail returns the last n lines of unit's journal, formatted.
func Tail(ctx context.Context, unit string, n int) ([]string, error) {
	var b strings.Builder
	if err := Copy(ctx, Options{Units: []string{unit}, Lines: n}, &b); err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(b.String(), "\n"), "\n"), nil
}
