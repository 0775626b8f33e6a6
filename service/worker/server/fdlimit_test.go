package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// childEnv makes the test binary serve at a low open-file limit
// (serveAtLimit) instead of running the tests.
const childEnv = "SERVER_TEST_SERVE_AT_LIMIT"

// childLimit is the child's RLIMIT_NOFILE; the test binary's own limit is
// never lowered.
const childLimit = 64

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := serveAtLimit(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveAtLimit runs in a child process: it serves on a loopback port,
// prints the address, logs JSON to stderr and exits when stdin closes.
func serveAtLimit() error {
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: childLimit, Max: childLimit}); err != nil {
		return fmt.Errorf("lower RLIMIT_NOFILE: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	log := logrus.New()
	log.SetFormatter(&logrus.JSONFormatter{})
	log.SetOutput(os.Stderr)
	s := New(Options{ReadHeaderTimeout: 30 * time.Second, ShutdownTimeout: time.Second, Log: logrus.NewEntry(log)},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	errc := make(chan error, 1)
	s.Serve([]net.Listener{ln}, errc)
	fmt.Println(ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes stdin
	return nil
}

// request sends GET / on c and reads the answer within d.
func request(c net.Conn, r *bufio.Reader, d time.Duration) error {
	c.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
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

// A real server at its open-file limit: the connections it holds keep being
// served, the ones it cannot accept wait in the backlog, net/http never sees
// the error (no "http: Accept error" per retry), the limit is logged once,
// and a fresh client is served once the held connections close.
func TestServerAtItsOpenFileLimit(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("child address: %v\n%s", err, stderr.String())
	}
	addr = strings.TrimSpace(addr)

	// More connections than the child may hold, each with one request.
	const clients = childLimit + 20
	conns := make([]net.Conn, 0, clients)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range clients {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		conns = append(conns, c)
	}
	served := make(chan int, clients)
	for i, c := range conns {
		go func() {
			if request(c, bufio.NewReader(c), 2*time.Second) == nil {
				served <- i
			} else {
				served <- -1
			}
		}()
	}
	var held []int
	for range clients {
		if i := <-served; i >= 0 {
			held = append(held, i)
		}
	}
	if len(held) == 0 || len(held) == clients {
		t.Fatalf("%d of %d connections served; want some held and some left in the backlog\n%s", len(held), clients, stderr.String())
	}
	t.Logf("at the limit: %d connections served, %d waiting in the backlog", len(held), clients-len(held))

	// The connections the child holds are still served. (A response
	// timed out above leaves its connection unusable, so only held ones.)
	for _, i := range held[:3] {
		c := conns[i]
		if err := request(c, bufio.NewReader(c), 5*time.Second); err != nil {
			t.Fatalf("second request on a held connection: %v", err)
		}
	}

	for _, c := range conns {
		c.Close()
	}
	conns = nil
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := request(c, bufio.NewReader(c), 10*time.Second); err != nil {
		t.Fatalf("fresh client after the held connections closed: %v\n%s", err, stderr.String())
	}

	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	limitLines, acceptErrors := 0, 0
	for _, line := range strings.Split(stderr.String(), "\n") {
		var e struct {
			Msg       string `json:"msg"`
			Component string `json:"component"`
		}
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		if strings.HasPrefix(e.Msg, "open-file limit reached") {
			limitLines++
		}
		if strings.Contains(e.Msg, "Accept error") {
			acceptErrors++
		}
	}
	// At most once per 10s warning interval, however long the test took.
	most := int(time.Since(start)/(10*time.Second)) + 1
	if limitLines < 1 || limitLines > most || acceptErrors != 0 {
		t.Fatalf("child logged the limit %d times (want 1..%d) and %d net/http accept errors (want 0):\n%s", limitLines, most, acceptErrors, stderr.String())
	}
}
