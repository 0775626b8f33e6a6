package server

import (
	"log"
	"strings"

	"github.com/sirupsen/logrus"
)

// newErrorLog routes net/http's own error messages (TLS handshake errors,
// panics in handlers, accept retries) to the injected logger.
func newErrorLog(entry *logrus.Entry) *log.Logger {
	return log.New(writerFunc(func(p []byte) (int, error) {
		entry.WithField("component", "net/http").Warn(strings.TrimSpace(string(p)))
		return len(p), nil
	}), "", 0)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
