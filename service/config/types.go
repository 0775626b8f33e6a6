package config

import (
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
)

// Size is a number of bytes, written as a plain number or with a binary
// suffix (KiB, MiB, GiB; K, M, G and KB, MB, GB are read as the same).
type Size int64

var sizeUnits = []struct {
	suffix string
	factor int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
}

// Decode implements envconfig.Decoder.
func (s *Size) Decode(value string) error {
	bad := validationDetail{"a size of 0 or more bytes, such as 65536, 64KiB or 1MiB"}
	v := strings.TrimSpace(value)
	factor := int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, factor = strings.TrimSpace(n), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/factor {
		return bad
	}
	*s = Size(n * factor)
	return nil
}

// String writes the size with the largest exact binary suffix.
func (s Size) String() string {
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if s != 0 && int64(s)%u.factor == 0 {
			return strconv.FormatInt(int64(s)/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// LogFormat is the log output format: text or json.
type LogFormat string

// Decode implements envconfig.Decoder.
func (f *LogFormat) Decode(value string) error {
	switch v := LogFormat(strings.ToLower(strings.TrimSpace(value))); v {
	case "text", "json":
		*f = v
		return nil
	}
	return validationDetail{"text or json"}
}

// LogLevel is a logrus level.
type LogLevel logrus.Level

// Decode implements envconfig.Decoder.
func (l *LogLevel) Decode(value string) error {
	lvl, err := logrus.ParseLevel(strings.TrimSpace(value))
	if err != nil || lvl < logrus.ErrorLevel {
		return validationDetail{"one of trace, debug, info, warn, error"}
	}
	*l = LogLevel(lvl)
	return nil
}

// String returns the level's name.
func (l LogLevel) String() string { return logrus.Level(l).String() }

// WorkerHeader says which responses carry X-Worker, the worker's name:
// WorkerHeaderConnection, WorkerHeaderEvery or WorkerHeaderOff.
type WorkerHeader string

const (
	// WorkerHeaderConnection names the worker on the first response of
	// each connection: a connection stays with the worker that accepted
	// it, so that response names the worker of every later one on it.
	WorkerHeaderConnection WorkerHeader = "connection"
	// WorkerHeaderEvery names it on every response.
	WorkerHeaderEvery WorkerHeader = "every"
	// WorkerHeaderOff sends no X-Worker.
	WorkerHeaderOff WorkerHeader = "off"
)

// Decode implements envconfig.Decoder.
func (h *WorkerHeader) Decode(value string) error {
	switch v := WorkerHeader(strings.ToLower(strings.TrimSpace(value))); v {
	case WorkerHeaderConnection, WorkerHeaderEvery, WorkerHeaderOff:
		*h = v
		return nil
	}
	return validationDetail{"connection, every or off"}
}

// RateLimitFallback is what a worker does while the shared rate-limit table
// cannot be opened: RateLimitLocal or RateLimitClosed.
type RateLimitFallback string

const (
	// RateLimitLocal limits each worker on a table of its own.
	RateLimitLocal RateLimitFallback = "local"
	// RateLimitClosed answers the limited routes 503.
	RateLimitClosed RateLimitFallback = "closed"
)

// Decode implements envconfig.Decoder.
func (f *RateLimitFallback) Decode(value string) error {
	switch v := RateLimitFallback(value); v {
	case RateLimitLocal, RateLimitClosed:
		*f = v
		return nil
	}
	return validationDetail{"local or closed"}
}
