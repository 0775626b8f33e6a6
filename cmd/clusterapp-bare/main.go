// Command clusterapp-bare is the benchmarks' outside anchor: the seed routes
// (/, /fib?n=, /slow, /healthz) served the way a Go developer writes them
// with nothing but net/http, one process, GOMAXPROCS left to Go. No
// admission, rate limit, metrics, connection tracking or systemd: what the
// suite's worker is measured against, so its handler stack and its pool
// have a price in the same run (docs/benchmarks.md).
//
//	clusterapp-bare [-listen 127.0.0.1:8090]
//
// Started by systemd with a socket (LISTEN_FDS, socket activation), it
// serves that socket instead of listening itself: the benchmark runs it
// under the worker unit's own hardening, so that the unit's price and the
// handler stack's can be told apart. How the socket arrives changes
// nothing in how requests are served.
//
// It runs until SIGTERM or SIGINT. Exit status: 0 after a signal, 1 when it
// cannot listen, 2 for bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/clusterapp/clusterapp/service/app/workload"
	"github.com/coreos/go-systemd/v22/activation"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, new(usageError)):
		fmt.Fprintln(os.Stderr, "clusterapp-bare:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "clusterapp-bare:", err)
		os.Exit(1)
	}
}

type usageError struct{ error }

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("clusterapp-bare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8090", "address to serve on (host:port)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("no arguments expected, got %q", fs.Args())}
	}
	srv := &http.Server{Addr: *listen, Handler: Mux(), ReadHeaderTimeout: 10 * time.Second}
	inherited, err := activation.Listeners() // unsets LISTEN_FDS, so nothing started later inherits it
	if err != nil {
		return fmt.Errorf("sockets from systemd: %w", err)
	}
	where := *listen
	errc := make(chan error, 1)
	switch {
	case len(inherited) > 1:
		return fmt.Errorf("systemd passed %d sockets; bare net/http serves one", len(inherited))
	case len(inherited) == 1 && inherited[0] == nil:
		return errors.New("systemd passed a socket that is not a stream socket")
	case len(inherited) == 1:
		where = inherited[0].Addr().String() + " (from systemd)"
		go func() { errc <- srv.Serve(inherited[0]) }()
	default:
		go func() { errc <- srv.ListenAndServe() }()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", where, err)
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shut)
	}
}

// Mux is the seed routes with net/http alone: same paths, bodies and
// workloads (workload.Fib, workload.SumOfSquares) as the worker's.
func Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("Hello World!\n"))
	})
	mux.HandleFunc("GET /fib", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n < 0 || n > 45 {
			http.Error(w, "n must be an integer from 0 to 45", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"fib":%d,"n":%d}`+"\n", workload.Fib(n), n)
	})
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"count": workload.SlowCount, "sum_of_squares": workload.SumOfSquares(workload.SlowCount)})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	return mux
}
