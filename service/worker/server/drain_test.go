package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/internal/clocktest"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// startDrain begins a drain and checks it is still waiting after several of
// its polls: only the injected clock can end it.
func startDrain(t *testing.T, s *Server) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Drain(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Drain returned (%v) before the injected clock moved", err)
	case <-time.After(100 * time.Millisecond):
	}
	if !s.Stats().Draining {
		t.Fatal("not draining")
	}
	return done
}

func drained(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Drain still waiting after the injected clock passed %s", what)
	}
}

// DrainIdleGrace is read on Options.Now: an idle connection holds a drain
// with an hour's grace until the injected clock has moved an hour.
func TestDrainIdleGraceIsOnTheInjectedClock(t *testing.T) {
	clock := clocktest.At(time.Unix(1000, 0))
	s, addr := newServer(t, func(o *Options) {
		o.Now, o.DrainIdleGrace, o.ShutdownTimeout = clock.Now, time.Hour, 2*time.Hour
	}, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	done := startDrain(t, s)
	clock.Advance(time.Hour)
	drained(t, done, "DrainIdleGrace")
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the idle connection is still open after the drain")
	}
}

// ShutdownTimeout is read on Options.Now too: a request that never ends
// holds the drain until the injected clock passes the timeout, and the
// drain then reports the connection it closes.
func TestShutdownTimeoutIsOnTheInjectedClock(t *testing.T) {
	clock := clocktest.At(time.Unix(1000, 0))
	log, hook := test.NewNullLogger()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	s, addr := newServer(t, func(o *Options) {
		o.Now, o.ShutdownTimeout, o.Log = clock.Now, time.Hour, logrus.NewEntry(log)
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	done := startDrain(t, s)
	clock.Advance(time.Hour)
	drained(t, done, "ShutdownTimeout")
	var warned *logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warned = e
		}
	}
	if warned == nil || warned.Data["connections"] != 1 || warned.Data["timeout"] != time.Hour {
		t.Fatalf("warning %+v, want one naming 1 connection and the 1h timeout", warned)
	}
}
