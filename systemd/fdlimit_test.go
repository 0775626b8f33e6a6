package systemd_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
	"golang.org/x/sys/unix"
)

// Issue 11, point 1: a client holding more connections than a worker's
// LimitNOFILE= must not get the worker killed. The worker keeps serving the
// connections it holds, keeps pinging the watchdog (the notify socket needs
// no new descriptor), logs the limit once per interval, and accepts again
// as soon as descriptors free up. Before the fix every WATCHDOG=1 failed with
// EMFILE and systemd killed the worker with SIGABRT.
func TestWorkerAtItsOpenFileLimitKeepsServingAndPinging(t *testing.T) {
	const watchdogSec = 2 * time.Second
	b := sandbox.New(t, sandbox.Options{Env: fmt.Sprintf(
		"CLUSTERAPP_WORKERS=1\nCLUSTERAPP_LIMIT_NOFILE=1024\nCLUSTERAPP_WATCHDOG_SEC=%s\n", watchdogSec)})
	b.Start(1)
	unit := config.WorkerUnit(1)
	pid := b.MainPID(unit)
	// The effective limit, not the configured one: the box may cap it.
	nofile := limit(t, b.Must("cat", fmt.Sprintf("/proc/%d/limits", pid)), false)
	clients := nofile + 100
	var own unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &own); err != nil || own.Cur < uint64(clients)+256 {
		t.Skipf("this test process may open %d files (%v); it needs %d for the idle connections and its own", own.Cur, err, clients+256)
	}

	// More connections than the worker may hold, each sending one request
	// and then staying open as an idle keep-alive connection.
	start := time.Now()
	ns := b.Netns()
	conns := make([]net.Conn, 0, clients)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	err := ns.Do(func() error {
		for range clients {
			c, err := net.DialTimeout("tcp", "127.0.0.1:8080", 5*time.Second)
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("dial %d connections inside the box: %v", clients, err)
	}
	readers := make([]*bufio.Reader, clients)
	answered := make(chan int, clients)
	for i, c := range conns {
		readers[i] = bufio.NewReader(c)
		go func() {
			if err := httpGet(c, readers[i], 3*time.Second); err != nil {
				answered <- -1
				return
			}
			answered <- i
		}()
	}
	var held []int
	for range clients {
		if i := <-answered; i >= 0 {
			held = append(held, i)
		}
	}
	atLimit := time.Now()
	t.Logf("effective LimitNOFILE %d; %d connections opened: %d answered and held idle, %d waiting in the backlog",
		nofile, clients, len(held), clients-len(held))

	// Hold them for 3 x WatchdogSec: the worker must keep pinging.
	time.Sleep(time.Until(atLimit.Add(3 * watchdogSec)))
	restarts := b.Show(unit, "NRestarts")
	if now := b.MainPID(unit); restarts != "0" || now != pid {
		t.Fatalf("NRestarts = %s, MainPID %d -> %d after %v at the open-file limit: the worker was killed\n%s",
			restarts, pid, now, 3*watchdogSec, whyKilled(b.Must("journalctl", "-u", unit, "-o", "cat", "--no-pager")))
	}
	if len(held) == 0 || len(held) == clients {
		t.Fatalf("%d of %d connections answered: the test did not bring the worker to its limit", len(held), clients)
	}
	for _, i := range held[:5] {
		if err := httpGet(conns[i], readers[i], 5*time.Second); err != nil {
			t.Fatalf("a held connection is no longer served: %v", err)
		}
	}

	// Once the idle connections close, a fresh client is served within 1s.
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	closed := time.Now()
	fresh, err := b.Dial("127.0.0.1:8080", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := httpGet(fresh, bufio.NewReader(fresh), 5*time.Second); err != nil {
		t.Fatalf("fresh client after the idle connections closed: %v", err)
	}
	took := time.Since(closed)
	t.Logf("fresh client served %v after the idle connections closed", took.Round(time.Millisecond))
	if took > time.Second {
		t.Fatalf("fresh client served %v after the idle connections closed, want within 1s", took)
	}

	// The journal: the limit logged once per 10s interval, not per accept;
	// no watchdog kill, no failed ping, no net/http accept retries.
	journal := b.Must("journalctl", "-u", unit, "-o", "cat", "--no-pager")
	warnings := strings.Count(journal, "open-file limit reached")
	most := int(time.Since(start)/(10*time.Second)) + 1
	first := ""
	for _, line := range strings.Split(journal, "\n") {
		if strings.Contains(line, "open-file limit reached") {
			first = line
			break
		}
	}
	t.Logf("limit warnings logged: %d (at most %d allowed), NRestarts %s; the first:\n%s", warnings, most, restarts, first)
	if warnings < 1 || warnings > most {
		t.Fatalf("the limit was logged %d times, want 1..%d:\n%s", warnings, most, tail(journal, 20))
	}
	for _, bad := range []string{"Watchdog timeout", "watchdog ping failed", "http: Accept error"} {
		if strings.Contains(journal, bad) {
			t.Fatalf("journal has %q:\n%s", bad, tail(journal, 20))
		}
	}
	if n, _ := strconv.Atoi(b.Show(unit, "NRestarts")); n != 0 {
		t.Fatalf("NRestarts = %d at the end", n)
	}
}

// whyKilled picks from a worker's journal the lines that say why it died,
// leaving out the goroutine dump, and counts net/http's accept retries.
func whyKilled(journal string) string {
	var lines []string
	retries := 0
	for _, line := range strings.Split(journal, "\n") {
		switch {
		case strings.Contains(line, "http: Accept error"):
			retries++
		case strings.Contains(line, "Watchdog timeout"), strings.Contains(line, "sd_notify failed"),
			strings.Contains(line, "health probe failed"), strings.Contains(line, "watchdog ping failed"),
			strings.Contains(line, "Failed with result"), strings.Contains(line, "restart counter"):
			lines = append(lines, line)
		}
	}
	return fmt.Sprintf("%s\n(and %d \"http: Accept error\" lines)", strings.Join(lines, "\n"), retries)
}

// httpGet sends GET / on c and reads a 200 answer within d.
func httpGet(c net.Conn, r *bufio.Reader, d time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: clusterapp\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// The notify socket is dialled once and kept: it must still reach systemd
// after the manager re-executes (daemon-reexec keeps its notify socket; were
// it re-created, the first failed send dials again).
func TestWorkerKeepsPingingAcrossDaemonReexec(t *testing.T) {
	const watchdogSec = 2 * time.Second
	b := sandbox.New(t, sandbox.Options{Env: fmt.Sprintf("CLUSTERAPP_WORKERS=1\nCLUSTERAPP_WATCHDOG_SEC=%s\n", watchdogSec)})
	b.Start(1)
	unit := config.WorkerUnit(1)
	pid := b.MainPID(unit)
	b.Must("systemctl", "daemon-reexec")
	before := b.Show(unit, "WatchdogTimestampMonotonic")
	time.Sleep(3 * watchdogSec)
	after := b.Show(unit, "WatchdogTimestampMonotonic")
	if restarts, now := b.Show(unit, "NRestarts"), b.MainPID(unit); restarts != "0" || now != pid {
		t.Fatalf("after daemon-reexec: NRestarts = %s, MainPID %d -> %d", restarts, pid, now)
	}
	b1, _ := strconv.ParseUint(before, 10, 64)
	a1, _ := strconv.ParseUint(after, 10, 64)
	if a1 <= b1 {
		t.Fatalf("no watchdog ping reached systemd in %v after daemon-reexec (WatchdogTimestampMonotonic %s, then %s)", 3*watchdogSec, before, after)
	}
	t.Logf("last watchdog ping %v later than right after daemon-reexec", time.Duration(a1-b1)*time.Microsecond)
	if journal := b.Must("journalctl", "-u", unit, "-o", "cat", "--no-pager"); strings.Contains(journal, "sd_notify failed") {
		t.Fatalf("a notification failed across daemon-reexec:\n%s", whyKilled(journal))
	}
}
