package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"syscall"
	"time"
)

// client is one goroutine's HTTP/1.1 connection, spoken by hand the way wrk
// does: write a request, read a response, reuse the connection unless the
// server or Options.KeepAlive says otherwise.
//
// net/http's Transport is not used on purpose: it silently retries an
// idempotent request whose reused connection the server closed before
// answering, which is exactly the failure a lossless drain must be shown not
// to cause. Here every such failure is counted.
type client struct {
	opts    Options
	dialer  *net.Dialer
	dials   *atomic.Int64
	request []byte // the request bytes, the same every time
	conn    net.Conn
	br      *bufio.Reader
	// named is the Options.Header value of the connection: the last one a
	// response on it carried, "" until one does. A worker names itself on
	// the first response of a connection by default
	// (CLUSTERAPP_WORKER_HEADER), and a connection never changes worker,
	// so every response on it is counted under that name.
	named string
}

func newClient(opts Options, dials *atomic.Int64) *client {
	u, _ := url.Parse(opts.URL) // validated by withDefaults
	connection := ""
	if !opts.KeepAlive {
		connection = "Connection: close\r\n"
	}
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: clusterapp-load\r\n%s\r\n", u.RequestURI(), u.Host, connection)
	return &client{
		opts:    opts,
		dialer:  &net.Dialer{Timeout: opts.Timeout, Control: loopbackOnly},
		dials:   dials,
		request: []byte(req),
	}
}

// do sends one request and reads the whole response. The connection is
// dropped after an error or a response that closes it; named is then still
// the name of the one that carried the response, until the next dial.
func (c *client) do(ctx context.Context) (*http.Response, error) {
	if c.conn == nil {
		c.dials.Add(1)
		conn, err := c.dialer.DialContext(ctx, "tcp", hostPort(c.opts.URL))
		if err != nil {
			return nil, err
		}
		c.conn, c.br, c.named = conn, bufio.NewReader(conn), ""
	}
	// Cancelling ctx interrupts a request in flight by expiring its deadline.
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	resp, err := c.roundTrip()
	stop()
	if err == nil {
		if v := resp.Header.Get(c.opts.Header); v != "" {
			c.named = v
		}
	}
	if err != nil || resp.Close || !c.opts.KeepAlive {
		c.close()
	}
	return resp, err
}

func (c *client) roundTrip() (*http.Response, error) {
	if err := c.conn.SetDeadline(time.Now().Add(c.opts.Timeout)); err != nil {
		return nil, err
	}
	if _, err := c.conn.Write(c.request); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close() // fully read or failed: nothing left to report
	return resp, err
}

func (c *client) close() {
	if c.conn != nil {
		_ = c.conn.Close() // the connection is being dropped either way
		c.conn, c.br = nil, nil
	}
}

// hostPort is the URL's host with the default port filled in.
func hostPort(raw string) string {
	u, _ := url.Parse(raw)
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// loopbackOnly is a net.Dialer Control function: it runs with the resolved
// address just before connect, so it catches a name that resolved to a
// non-loopback address however the name got there.
func loopbackOnly(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("check dial address %q: %w", address, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: %s %s", ErrNotLoopback, network, address)
	}
	return nil
}
