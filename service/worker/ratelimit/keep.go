package ratelimit

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// Mode is which table a limiter is on.
type Mode string

const (
	// ModeShared: the table every worker maps; the limit is service-wide.
	ModeShared Mode = "shared"
	// ModeLocal: a table of this worker's own while the shared one cannot be
	// opened; a client may get up to one budget per worker.
	ModeLocal Mode = "local"
	// ModeClosed: no table while the shared one cannot be opened; limited
	// routes answer 503.
	ModeClosed Mode = "closed"
)

// KeepOptions configure Keep.
type KeepOptions struct {
	// Open opens the shared table.
	Open func() (*Table, error)
	// Fallback is what the limiter does while Open fails: ModeLocal (the
	// default) or ModeClosed.
	Fallback Mode
	// Slots sizes the local table of ModeLocal.
	Slots int
	// Every is the pause between attempts to open the shared table. Default 5s.
	Every time.Duration
	// Log is told of each change of state, once.
	Log *logrus.Entry
}

// Keeper keeps a limiter on the shared table, or on its fallback until the
// shared table opens.
type Keeper struct {
	l     *Limiter
	opts  KeepOptions
	mode  atomic.Value // Mode
	last  string       // the last failure logged
	after func(time.Duration) <-chan time.Time
}

// Keep puts l on the shared table if it opens now; otherwise on the fallback,
// saying so, and Run retries.
func Keep(l *Limiter, opts KeepOptions) *Keeper {
	if opts.Fallback == "" {
		opts.Fallback = ModeLocal
	}
	if opts.Every == 0 {
		opts.Every = UnavailableRetryAfter
	}
	k := &Keeper{l: l, opts: opts, after: time.After}
	t, err := opts.Open()
	if err == nil {
		k.use(t)
		return k
	}
	k.last = err.Error()
	k.mode.Store(opts.Fallback)
	log := opts.Log.WithError(err).WithFields(logrus.Fields{"fallback": string(opts.Fallback), "retry_every": opts.Every})
	if opts.Fallback == ModeClosed {
		l.SetTable(nil)
		log.Error("shared rate-limit table unavailable: rate-limited routes answer 503 until it opens (CLUSTERAPP_RATE_LIMIT_FALLBACK=closed); health, readiness and metrics are served")
		return k
	}
	l.SetTable(NewLocal(opts.Slots))
	log.Warn("shared rate-limit table unavailable: this worker limits on a table of its own until it opens, so a client may get up to one budget per worker (CLUSTERAPP_RATE_LIMIT_FALLBACK=local)")
	return k
}

// Mode is the table the limiter is on now.
func (k *Keeper) Mode() Mode { return k.mode.Load().(Mode) }

// Run tries to open the shared table every Every until it opens (then moves
// the limiter to it, logs that, and returns) or ctx ends. A failure is logged
// only when it differs from the last one logged. It returns at once when the
// limiter is already on the shared table.
func (k *Keeper) Run(ctx context.Context) {
	for attempt := 1; k.Mode() != ModeShared; attempt++ {
		select {
		case <-ctx.Done():
			return
		case <-k.after(k.opts.Every):
		}
		t, err := k.opts.Open()
		if err != nil {
			if err.Error() != k.last {
				k.last = err.Error()
				k.opts.Log.WithError(err).WithField("fallback", string(k.opts.Fallback)).Warn("shared rate-limit table still unavailable")
			}
			continue
		}
		k.use(t)
		k.opts.Log.WithFields(logrus.Fields{"retries": attempt, "was": string(k.opts.Fallback)}).Info("shared rate-limit table opened: the limit is service-wide again")
	}
}

func (k *Keeper) use(t *Table) {
	k.l.SetTable(t)
	k.mode.Store(ModeShared)
}
