package metrics

import (
	"bytes"
	"encoding/binary"
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
// queue is full, and publishes every queue's length, limit and address in
// the pool's words (the metrics exporter holds no service socket: it
// reports these). Every worker ticks, but one sample per period counts:
// the worker that moves the pool's last-sample stamp forward
// (compare-and-swap) takes it, so the total does not grow with the number
// of workers.
func (m *Metrics) sampleQueues() {
	at := m.pool(pSampledAt)
	now := uint64(m.clock())
	last := atomic.LoadUint64(at)
	if int64(now-last) < int64(queueEvery-queueEvery/10) || !atomic.CompareAndSwapUint64(at, last, now) {
		return
	}
	qs := m.queues.read()
	m.publishQueues(qs)
	for _, q := range qs {
		if q.limit > 0 && q.length >= q.limit {
			atomic.AddUint64(m.pool(pFullNs), uint64(queueEvery))
			return
		}
	}
}

// The accept queues in the pool's words: at most maxQueues sockets (a
// socket unit with more ListenStream= lines has the others left out), each
// its length, its limit and its address (addrWords words of bytes, cut at
// 8*addrWords).
const (
	maxQueues  = 8
	addrWords  = 8
	queueWords = 2 + addrWords
	// queueStale is the age past which the published queues are not
	// reported: no worker samples them (the pool is down, or every worker
	// is stalled, which clusterapp_worker_stalled reports).
	queueStale = time.Second
)

// publishQueues writes qs to the pool's words.
func (m *Metrics) publishQueues(qs []queue) {
	n := min(len(qs), maxQueues)
	for i, q := range qs[:n] {
		base := pQueue + i*queueWords
		atomic.StoreUint64(m.pool(base), uint64(q.length))
		atomic.StoreUint64(m.pool(base+1), uint64(q.limit))
		var b [8 * addrWords]byte
		copy(b[:], q.addr)
		for w := range addrWords {
			atomic.StoreUint64(m.pool(base+2+w), binary.LittleEndian.Uint64(b[8*w:]))
		}
	}
	atomic.StoreUint64(m.pool(pQueues), uint64(n))
}

// publishedQueues reads the queues the last sample published, none when it
// is older than queueStale.
func (m *Metrics) publishedQueues() []queue {
	age := time.Duration(uint64(m.clock()) - atomic.LoadUint64(m.pool(pSampledAt)))
	if age < 0 || age > queueStale {
		return nil
	}
	n := min(int(atomic.LoadUint64(m.pool(pQueues))), maxQueues)
	out := make([]queue, 0, n)
	for i := range n {
		base := pQueue + i*queueWords
		var b [8 * addrWords]byte
		for w := range addrWords {
			binary.LittleEndian.PutUint64(b[8*w:], atomic.LoadUint64(m.pool(base+2+w)))
		}
		addr, _, _ := bytes.Cut(b[:], []byte{0})
		out = append(out, queue{addr: string(addr), length: uint32(atomic.LoadUint64(m.pool(base))), limit: uint32(atomic.LoadUint64(m.pool(base + 1)))})
	}
	return out
}

// scrapeQueues are the queues a scrape reports: read from the sockets
// themselves in a process that holds them (a worker), else as the workers
// last published them (the metrics exporter).
func (m *Metrics) scrapeQueues() []queue {
	if m.queues.watching() {
		return m.queues.read()
	}
	return m.publishedQueues()
}

func (q *listenQueues) watching() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.conns) > 0
}

func (m *Metrics) pool(w int) *uint64 { return &m.words[Slots*m.lay.perSlot+w] }
