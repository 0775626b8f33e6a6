// Command clusterapp-load sends bounded HTTP load to a loopback URL and
// prints what it measured: counts by status and by error kind, latency
// percentiles and which worker (the X-Worker response header) served each
// request. It is the command-line face of package service/lab/loadgen, for
// benchmarks and for integration tests that drive the built binaries.
//
//	clusterapp-load -url http://127.0.0.1:8080/ -c 32 -d 30s
//	clusterapp-load -url http://127.0.0.1:8080/ -rate 2000 -d 1m -json
//	clusterapp-load -url 'http://127.0.0.1:8080/fib?n=30' -rate 2000 -d 5s -trace spike.txt
//
// It stops by itself at -n requests or after -d (never later than
// loadgen.MaxDuration), and on SIGINT or SIGTERM; in every case it prints the
// result. Exit status: 0 when it ran (however many requests failed), 2 for
// bad flags, 1 when it could not write its report.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	code := exitCode(err)
	if code != 0 {
		fmt.Fprintln(os.Stderr, "clusterapp-load:", err)
	}
	os.Exit(code)
}

// usageError is a problem with the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var usage *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		return 2
	default:
		return 1
	}
}

// run loads the target described by args and writes the result to stdout:
// one JSON object with -json, a short summary otherwise. ctx ends the run
// early; what was measured until then is still written.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	opts, out, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	var trace *os.File
	if out.trace != "" {
		// Opened before the run, so a path that cannot be written fails
		// at once rather than after the load.
		opts.Trace = true
		if trace, err = os.Create(out.trace); err != nil {
			return &usageError{fmt.Sprintf("-trace: %v", err)}
		}
		defer trace.Close() // closed and checked below; this covers the early returns
	}
	res, err := loadgen.Run(ctx, opts)
	if err != nil {
		return optionUsageError(err)
	}
	if trace != nil {
		if err := res.WriteTrace(trace); err != nil {
			return fmt.Errorf("write trace %s: %w", out.trace, err)
		}
		if err := trace.Close(); err != nil {
			return fmt.Errorf("write trace %s: %w", out.trace, err)
		}
	}
	if out.json {
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			return fmt.Errorf("write result: %w", err)
		}
		return nil
	}
	if err := res.WriteSummary(stdout); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

// flagNames maps loadgen.Options fields to the flags that set them, so the
// library's validation errors name what the user typed.
var flagNames = map[string]string{
	"URL":         "-url",
	"Concurrency": "-c",
	"Requests":    "-n",
	"Duration":    "-d",
	"Rate":        "-rate",
	"Timeout":     "-timeout",
	"Header":      "-header",
}

func optionUsageError(err error) error {
	var optErr *loadgen.OptionError
	if !errors.As(err, &optErr) {
		return err
	}
	return &usageError{fmt.Sprintf("%s: want %s, got %s", flagNames[optErr.Field], optErr.Want, optErr.Got)}
}

// outputs are what the command writes besides the load: the result as
// JSON, and the per-request trace's path.
type outputs struct {
	json  bool
	trace string
}

func parseFlags(args []string, stdout io.Writer) (opts loadgen.Options, out outputs, err error) {
	opts = loadgen.Options{
		Concurrency: loadgen.DefaultConcurrency,
		Duration:    10 * time.Second,
		KeepAlive:   true,
		Timeout:     loadgen.DefaultTimeout,
		Header:      loadgen.DefaultHeader,
	}
	fs := flag.NewFlagSet("clusterapp-load", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned as one line; -h prints to stdout below
	fs.StringVar(&opts.URL, "url", "", "target `URL`, on loopback only, e.g. http://127.0.0.1:8080/ (required)")
	fs.Var(intFlag(&opts.Concurrency, 1), "c", "`number` of concurrent connections, one goroutine each")
	fs.Var(intFlag(&opts.Requests, 0), "n", "stop after this `number` of requests; 0: no cap (-d 0 -n N runs until N)")
	fs.Var(durationFlag(&opts.Duration, 0), "d", "stop after this `duration`; 0: only -n and the "+loadgen.MaxDuration.String()+" cap")
	fs.Var(boolFlag{&opts.KeepAlive}, "keepalive", "reuse one connection per goroutine; false: a new connection per request")
	fs.Var(floatFlag{&opts.Rate}, "rate", "open-loop `rate` in requests per second across all connections; 0: as fast as possible")
	fs.Var(durationFlag(&opts.Timeout, time.Millisecond), "timeout", "per-request timeout (a `duration`), up to the end of the body")
	fs.StringVar(&opts.Header, "header", opts.Header, "response header `name` whose values are counted (which worker served; a response without it counts under the value its connection last carried)")
	fs.BoolVar(&out.json, "json", false, "print the result as one JSON object")
	fs.StringVar(&out.trace, "trace", "", "write every request to `file`, one line each: intended send time (Unix µs), how late the generator sent it and the latency (µs), status (0: failed)")

	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fmt.Fprintln(stdout, "usage: clusterapp-load -url http://127.0.0.1:PORT/ [flags]")
		fs.PrintDefaults()
		return opts, out, err
	case err != nil:
		return opts, out, &usageError{err.Error()}
	case fs.NArg() > 0:
		return opts, out, &usageError{fmt.Sprintf("unexpected argument %q: give the target with -url", fs.Arg(0))}
	}
	return opts, out, nil
}

// The flag types below make a parse error say what is expected; the flag
// package prefixes it with the value and the flag name.

type intValue struct {
	p   *int
	min int
}

func intFlag(p *int, min int) *intValue { return &intValue{p: p, min: min} }

func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < v.min {
		return fmt.Errorf("want a whole number >= %d", v.min)
	}
	*v.p = n
	return nil
}

func (v *intValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strconv.Itoa(*v.p)
}

type durationValue struct {
	p   *time.Duration
	min time.Duration
}

func durationFlag(p *time.Duration, min time.Duration) *durationValue {
	return &durationValue{p: p, min: min}
}

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < v.min {
		return fmt.Errorf("want a duration >= %v, such as 500ms, 30s or 2m", v.min)
	}
	*v.p = d
	return nil
}

func (v *durationValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return v.p.String()
}

type floatFlag struct{ p *float64 }

func (v floatFlag) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return errors.New("want a number >= 0")
	}
	*v.p = f
	return nil
}

func (v floatFlag) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}

type boolFlag struct{ p *bool }

func (v boolFlag) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*v.p = b
	return nil
}

func (v boolFlag) String() string   { return strconv.FormatBool(v.p != nil && *v.p) }
func (v boolFlag) IsBoolFlag() bool { return true }
