package main

import (
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/clusterapp/clusterapp/service/admission"
	"github.com/clusterapp/clusterapp/service/app"
	"github.com/clusterapp/clusterapp/service/cache"
	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/metrics"
	"github.com/clusterapp/clusterapp/service/ratelimit"
	"github.com/sirupsen/logrus"
)

// rateTableFile is the shared rate-limit table, in the units' common
// RuntimeDirectory ($RUNTIME_DIRECTORY, /run/clusterapp).
const rateTableFile = "ratelimit.table"

// protection is the spike-traffic machinery a worker is configured with:
// built once at start, before anything serves.
type protection struct {
	maxInFlight int
	cfg         config.Config
	rateTable   *ratelimit.Table
}

// newProtection opens the shared rate-limit table (when a limit is set) and
// sizes admission control. The table stays mapped until the process exits.
func newProtection(cfg config.Config, log *logrus.Entry) (protection, error) {
	p := protection{cfg: cfg, maxInFlight: cfg.MaxInFlight}
	if p.maxInFlight == 0 {
		p.maxInFlight = runtime.GOMAXPROCS(0)
	}
	_, explicit := os.LookupEnv("GOMAXPROCS")
	current := runtime.GOMAXPROCS(0)
	switch procs, change, tooFew := admission.ServingProcs(current, p.maxInFlight, explicit); {
	case change:
		runtime.GOMAXPROCS(procs)
		log.WithFields(logrus.Fields{"gomaxprocs": procs, "was": current, "max_in_flight": p.maxInFlight}).
			Info("GOMAXPROCS raised by one, so rejections and health checks never wait behind CPU-bound requests holding every P")
	case tooFew:
		log.WithFields(logrus.Fields{"gomaxprocs": current, "max_in_flight": p.maxInFlight}).
			Warn("GOMAXPROCS is not above CLUSTERAPP_MAX_IN_FLIGHT: when every slot computes, rejections and /healthz wait for Go's 10 ms preemption; unset GOMAXPROCS or set it above the slots")
	}
	if cfg.RateLimit > 0 {
		dir := os.Getenv("RUNTIME_DIRECTORY")
		if dir == "" {
			p.rateTable = ratelimit.NewLocal(cfg.RateLimitSlots)
			log.Warn("no RUNTIME_DIRECTORY: the rate limit applies to this process only, not to the whole service")
		} else {
			t, err := ratelimit.OpenShared(filepath.Join(dir, rateTableFile), cfg.RateLimitSlots)
			if err != nil {
				return p, err
			}
			p.rateTable = t
		}
	}
	log.WithFields(logrus.Fields{
		"max_in_flight": p.maxInFlight, "admission_wait": cfg.AdmissionWait,
		"rate_limit": cfg.RateLimit, "rate_burst": cfg.RateBurst, "cache_entries": cfg.CacheEntries,
		"request_timeout": cfg.RequestTimeout,
	}).Info("protection")
	return p, nil
}

// apply sets the protection fields of o, observed by m.
func (p protection) apply(o *app.Options, m *metrics.Metrics) {
	o.Admission = admission.New(admission.Options{
		MaxInFlight: p.maxInFlight, Wait: p.cfg.AdmissionWait, RetryAfter: time.Second,
		Exempt: app.Unprotected, Observer: m,
	})
	if p.rateTable != nil {
		trusted, _ := config.ParsePrefixes(p.cfg.TrustedProxies) // validated by config.Load
		exempt := map[string]bool{}
		for _, path := range app.Unprotected {
			exempt[path] = true
		}
		o.RateLimit = &ratelimit.Middleware{
			Limiter: ratelimit.NewLimiter(p.rateTable, p.cfg.RateLimit, p.cfg.RateBurst, nil),
			Trusted: trusted, Exempt: exempt, Observer: m,
		}
	}
	if p.cfg.CacheEntries > 0 {
		o.Cache = cache.New(p.cfg.CacheEntries, int64(p.cfg.CacheBytes), m)
	}
}
