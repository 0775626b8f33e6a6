// Package loadgen is a bounded HTTP load generator for the loopback interface,
// used by the integration tests and benchmarks to drive several clusterapp
// workers that share one listening socket.
//
// Run starts Options.Concurrency goroutines. Each owns its own http.Transport
// limited to one connection (MaxConnsPerHost 1, no proxy, no compression), so
// connections are never pooled across goroutines: with KeepAlive each
// goroutine holds one connection open for the whole run, like wrk; without it
// every request dials a new connection, which exercises the shared socket's
// accept queue. Every response body is read to the end and closed, so a
// keep-alive connection can be reused and its latency covers the whole body.
//
// Requests are numbered by an atomic counter that all goroutines share, which
// makes the Requests cap exact. In the default closed loop a goroutine sends
// its next request as soon as the previous one finished. With Rate > 0 the run
// is open-loop: request i is due at start + i/Rate, and its latency is
// measured from that intended send time, not from when a goroutine got round
// to sending it. A stalled server therefore shows up as latency instead of as
// fewer samples (the "coordinated omission" that wrk2 corrects the same way).
//
// Every run stops by itself: at Options.Requests, at Options.Duration, and in
// any case at MaxDuration, plus at most one Options.Timeout for the requests
// still in flight. Cancelling the context stops it early and still returns
// what was measured.
//
// Load must never leave the machine: Run refuses a target that is not
// 127.0.0.0/8, ::1 or localhost, and the dialer checks the resolved address of
// every connection again, so neither a redirect (never followed anyway) nor a
// surprising name resolution can send traffic elsewhere.
//
// Failures are counted by kind, classified with errors.Is and errors.As:
// ConnectErrors (the dial failed: nothing accepted the connection),
// ReadErrors (the connection broke after it was established), Timeouts and
// OtherErrors. A socket-activation test asserts ConnectErrors == 0 across a
// restart, because systemd keeps the listening socket open while no worker
// runs. Latency percentiles come from a fixed-size log-linear histogram per
// goroutine (about 1.6% resolution), so memory stays bounded however long a
// run lasts.
package loadgen
