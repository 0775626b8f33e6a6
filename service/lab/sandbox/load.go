package sandbox

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/loadgen"
)

// LoadOptions say how the generator runs inside the box. The zero value
// runs it as is, bounded by CommandTimeout.
type LoadOptions struct {
	// CPUs binds the generator to these CPUs (a taskset list, e.g. "1");
	// default "": anywhere.
	CPUs string
	// Nice is the generator's nice value; default 0: the box's default.
	Nice int
	// Budget is how long the run may take; the command is given a minute
	// more to start and report. Default 0: CommandTimeout.
	Budget time.Duration
}

// Load runs the generator inside the box against url, any address on the
// box's loopback (URL+path for the suite), with its flags (e.g. "-c",
// "16", "-d", "5s") and returns what it measured.
func (d *Driver) Load(ctx context.Context, url string, opts LoadOptions, flags ...string) (*loadgen.Result, error) {
	argv := append([]string{LoadPath, "-json", "-url", url}, flags...)
	if opts.Nice != 0 {
		argv = append([]string{"nice", "-n", strconv.Itoa(opts.Nice)}, argv...)
	}
	if opts.CPUs != "" {
		argv = append([]string{"taskset", "-c", opts.CPUs}, argv...)
	}
	timeout := CommandTimeout
	if opts.Budget > 0 {
		timeout = opts.Budget + time.Minute
	}
	out, err := d.Exec(ctx, timeout, argv...)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", url, err)
	}
	res, err := loadgen.ParseResult([]byte(out))
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", url, err)
	}
	return res, nil
}
