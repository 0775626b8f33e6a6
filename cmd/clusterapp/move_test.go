package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestPiledConnectionsMoveWhenRequestsWait: keep-alive clients that all
// connected while worker 1 was alone stay on it when worker 2 joins, as long
// as their requests do not wait; once they wait near the admission wait
// (one slot, eight clients of a 13 ms computation), worker 1 ends
// connections after their responses (Connection: close) and the clients'
// reconnections go to worker 2, until the two hold about as many each.
func TestPiledConnectionsMoveWhenRequestsWait(t *testing.T) {
	sock := newSharedSocket(t)
	env := []string{
		"RUNTIME_DIRECTORY=" + t.TempDir(), "CLUSTERAPP_MAX_IN_FLIGHT=1", "CLUSTERAPP_ADMISSION_WAIT=100ms",
		"CLUSTERAPP_CACHE_ENTRIES=0", "CLUSTERAPP_RATE_LIMIT=0",
	}
	n1, n2 := newNotifySocket(t), newNotifySocket(t)
	w1 := startWorker(t, &sock, n1, append([]string{"--instance=1"}, env...)...)
	n1.waitFor(t, "READY=1", 10*time.Second)

	var mu sync.Mutex // guards client.worker, read while clients run
	type client struct {
		conn   net.Conn
		br     *bufio.Reader
		worker string // X-Worker of the connection's first response
		fresh  bool   // the next response is the connection's first
	}
	dial := func(c *client) error {
		conn, err := net.DialTimeout("tcp", sock.addr, 5*time.Second)
		if err != nil {
			return err
		}
		c.conn, c.br, c.fresh = conn, bufio.NewReader(conn), true
		return nil
	}
	// do sends one request on c and reports whether the server ended the
	// connection after it (then c is connected again).
	do := func(c *client, path string) (status int, closed bool, err error) {
		_ = c.conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c.conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return 0, false, err
		}
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			return 0, false, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if c.fresh {
			mu.Lock()
			c.worker, c.fresh = resp.Header.Get("X-Worker"), false
			mu.Unlock()
		}
		if resp.Close {
			c.conn.Close()
			return resp.StatusCode, true, dial(c)
		}
		return resp.StatusCode, false, nil
	}
	clients := make([]*client, 8)
	for i := range clients {
		clients[i] = &client{}
		if err := dial(clients[i]); err != nil {
			t.Fatal(err)
		}
		if _, _, err := do(clients[i], "/"); err != nil {
			t.Fatal(err)
		}
		if clients[i].worker != "1" {
			t.Fatalf("client %d reached worker %q while worker 1 was alone", i, clients[i].worker)
		}
	}
	defer func() {
		for _, c := range clients {
			c.conn.Close()
		}
	}()
	w2 := startWorker(t, &sock, n2, append([]string{"--instance=2"}, env...)...)
	n2.waitFor(t, "READY=1", 10*time.Second)

	// One request at a time: nothing waits, nothing moves.
	for round := range 3 {
		for i, c := range clients {
			if _, closed, err := do(c, "/fib?n=20"); err != nil || closed {
				t.Fatalf("round %d, client %d: connection ended (%v, %v) with no request waiting", round, i, closed, err)
			}
		}
	}

	// Every client at once, each request 13 ms of CPU behind one slot.
	var (
		moved    int
		statuses = map[int]int{}
		wg       sync.WaitGroup
		errs     = make(chan error, len(clients))
	)
	on2 := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range clients {
			if c.worker == "2" {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && on2() < 3 {
				status, closed, err := do(c, "/fib?n=32")
				mu.Lock()
				statuses[status]++
				if closed {
					moved++
				}
				mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("responses by status %v, connections ended %d, clients on worker 2: %d of %d", statuses, moved, on2(), len(clients))
	if on2() < 3 {
		t.Fatalf("%d of %d clients reached worker 2 in 10 s while worker 1 queued their requests", on2(), len(clients))
	}
	_, metrics := get(t, "http://"+sock.metrics.addr+"/metrics")
	got, _ := strconv.Atoi(metricValue(metrics, "clusterapp_balance_connections_moved_total", `worker="1"`))
	if got < 3 || got > moved {
		t.Fatalf(`clusterapp_balance_connections_moved_total{worker="1"} = %d, want from 3 to the %d connections ended`, got, moved)
	}
	for _, w := range []*proc{w1, w2} {
		w.signal(t, syscall.SIGTERM)
		if code := w.wait(t, 15*time.Second); code != 0 {
			t.Fatalf("worker exit %d, want 0", code)
		}
	}
}
