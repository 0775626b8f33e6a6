package metrics

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// queueEvery is how often the pool samples the service sockets' accept
// queues. The kernel keeps no per-socket count of connections dropped on a
// full accept queue (ListenOverflows is per network namespace, and a worker
// runs in a private one), so the pool samples the queue's length against
// its limit and counts the time it was seen full.
const queueEvery = 100 * time.Millisecond

// listenQueues are the service sockets whose accept queues are sampled.
type listenQueues struct {
	mu    sync.Mutex
	conns []queueConn
}

type queueConn struct {
	addr string
	rc   syscall.RawConn
}

// queue is one accept queue as TCP_INFO reports it for a listening socket.
type queue struct {
	addr          string
	length, limit uint32
}

// WatchListeners makes the accept queues of ls (the service sockets, shared
// by every worker) part of the pool's metrics.
func (m *Metrics) WatchListeners(ls []net.Listener) {
	m.queues.mu.Lock()
	defer m.queues.mu.Unlock()
	for _, l := range ls {
		sc, ok := l.(syscall.Conn)
		if !ok {
			continue
		}
		if rc, err := sc.SyscallConn(); err == nil {
			m.queues.conns = append(m.queues.conns, queueConn{addr: l.Addr().String(), rc: rc})
		}
	}
}

// read returns each watched socket's accept queue. For a listening socket
// TCP_INFO's unacked is the queue's length and sacked its limit (the
// backlog, capped by net.core.somaxconn).
func (q *listenQueues) read() []queue {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]queue, 0, len(q.conns))
	for _, c := range q.conns {
		var info *unix.TCPInfo
		var err error
		if cerr := c.rc.Control(func(fd uintptr) {
			info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		}); cerr != nil || err != nil {
			continue
		}
		out = append(out, queue{addr: c.addr, length: info.Unacked, limit: info.Sacked})
	}
	return out
}

// sampleQueues adds queueEvery to the pool's full time when an accept
// queue is full. Every worker ticks, but one sample per period counts: the
// worker that moves the pool's last-sample stamp forward (compare-and-swap)
// takes it, so the total does not grow with the number of workers.
func (m *Metrics) sampleQueues() {
	at := m.pool(pSampledAt)
	now := uint64(m.clock())
	last := atomic.LoadUint64(at)
	if int64(now-last) < int64(queueEvery-queueEvery/10) || !atomic.CompareAndSwapUint64(at, last, now) {
		return
	}
	for _, q := range m.queues.read() {
		if q.limit > 0 && q.length >= q.limit {
			atomic.AddUint64(m.pool(pFullNs), uint64(queueEvery))
			return
		}
	}
}

func (m *Metrics) pool(w int) *uint64 { return &m.words[Slots*m.lay.perSlot+w] }
