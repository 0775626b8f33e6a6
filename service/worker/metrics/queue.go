package metrics

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/internal/acceptq"
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

// read returns each watched socket's accept queue (package acceptq); a
// socket that cannot be read is left out.
func (q *listenQueues) read() []queue {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]queue, 0, len(q.conns))
	for _, c := range q.conns {
		length, limit, err := acceptq.Read(c.rc)
		if err != nil {
			continue
		}
		out = append(out, queue{addr: c.addr, length: length, limit: limit})
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
