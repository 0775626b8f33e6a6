package loadgen

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strings"
	"time"
)

// Limits and defaults of Options.
const (
	// MaxDuration bounds every run, including one capped only by Requests,
	// so a forgotten loop cannot load the machine for ever.
	MaxDuration = 10 * time.Minute
	// MaxConcurrency bounds the goroutines and connections of one run; each
	// holds a socket and a histogram of about 19 KiB.
	MaxConcurrency = 4096

	DefaultConcurrency = 16
	DefaultTimeout     = 10 * time.Second
	DefaultHeader      = "X-Worker"
)

// ErrNotLoopback is returned (wrapped in an *OptionError for URL) when the
// target host is not a loopback address or localhost.
var ErrNotLoopback = errors.New("loadgen: target is not a loopback address")

// Options says what to load and for how long. The zero value of every field
// but URL and one of Requests and Duration means its default.
type Options struct {
	// URL is the target, e.g. http://127.0.0.1:8080/. Its host must be in
	// 127.0.0.0/8, ::1 or localhost; the scheme http.
	URL string
	// Concurrency is the number of goroutines, each with its own connection.
	// Default 16, at most MaxConcurrency.
	Concurrency int
	// Requests caps the requests sent in total; 0 means no cap.
	Requests int
	// Duration caps the run time; 0 means MaxDuration. At least one of
	// Requests and Duration must be > 0, and Duration must not exceed
	// MaxDuration.
	Duration time.Duration
	// KeepAlive makes each goroutine reuse one connection (like wrk); when
	// false every request opens a new connection.
	KeepAlive bool
	// Rate is the open-loop request rate per second across all goroutines;
	// 0 (the default) is a closed loop that sends as fast as responses come.
	Rate float64
	// Timeout bounds each request, from sending it to the end of its body.
	// Default 10 s, at most MaxDuration.
	Timeout time.Duration
	// Header names the response header whose values are counted in
	// Result.ByHeader, to see which worker served each request. Default
	// X-Worker.
	Header string
	// Trace keeps one Record per request in Result.Trace, about 48 bytes
	// each, to see which requests made a tail and when.
	Trace bool
}

// OptionError says which option is invalid and what is expected instead.
type OptionError struct {
	Field string // name of the Options field, e.g. "Concurrency"
	Want  string // what a valid value looks like
	Got   string // the value given
	Err   error  // the underlying cause, e.g. ErrNotLoopback; may be nil
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("loadgen: option %s: want %s, got %s", e.Field, e.Want, e.Got)
}

// Unwrap returns the underlying cause, so errors.Is(err, ErrNotLoopback)
// works on the error Run returns.
func (e *OptionError) Unwrap() error { return e.Err }

// withDefaults returns opts with defaults filled in, or an *OptionError
// for the first invalid field.
func (opts Options) withDefaults() (Options, error) {
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Header == "" {
		opts.Header = DefaultHeader
	}
	return opts, opts.validate()
}

func (opts Options) validate() error {
	if err := checkURL(opts.URL); err != nil {
		return err
	}
	switch {
	case opts.Concurrency < 1 || opts.Concurrency > MaxConcurrency:
		return &OptionError{Field: "Concurrency", Want: fmt.Sprintf("1 to %d", MaxConcurrency), Got: fmt.Sprint(opts.Concurrency)}
	case opts.Requests < 0:
		return &OptionError{Field: "Requests", Want: "0 (no cap) or more", Got: fmt.Sprint(opts.Requests)}
	case opts.Duration < 0 || opts.Duration > MaxDuration:
		return &OptionError{Field: "Duration", Want: "0 to " + MaxDuration.String(), Got: opts.Duration.String()}
	case opts.Duration == 0 && opts.Requests == 0:
		return &OptionError{Field: "Duration", Want: "> 0 unless a request count is set", Got: opts.Duration.String()}
	case opts.Timeout < 0 || opts.Timeout > MaxDuration:
		return &OptionError{Field: "Timeout", Want: "0 (default) to " + MaxDuration.String(), Got: opts.Timeout.String()}
	case opts.Rate < 0 || math.IsNaN(opts.Rate) || math.IsInf(opts.Rate, 0):
		return &OptionError{Field: "Rate", Want: "0 (closed loop) or a positive number of requests per second", Got: fmt.Sprint(opts.Rate)}
	case strings.ContainsAny(opts.Header, " \t\r\n:"):
		return &OptionError{Field: "Header", Want: "a header name such as X-Worker", Got: fmt.Sprintf("%q", opts.Header)}
	}
	return nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return &OptionError{Field: "URL", Want: "an http:// URL such as http://127.0.0.1:8080/ (plain HTTP/1.1: the target is on this machine)", Got: fmt.Sprintf("%q", raw), Err: err}
	}
	if !isLoopbackHost(u.Hostname()) {
		return &OptionError{Field: "URL", Want: "a host in 127.0.0.0/8, ::1 or localhost", Got: fmt.Sprintf("%q", u.Hostname()), Err: ErrNotLoopback}
	}
	return nil
}

// isLoopbackHost reports whether host (without port or brackets) is a
// loopback IP literal or the name localhost. Other names are refused rather
// than resolved: a name that resolves to loopback today may not tomorrow.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
