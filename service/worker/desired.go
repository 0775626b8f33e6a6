package worker

import (
	"errors"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/config/envfile"
)

// configuredPoolSize reads the pool size the files configure now, for
// clusterapp_pool_workers_desired: CLUSTERAPP_WORKERS from the environment
// file, then from the scale file beside it (its value wins), as the
// generator reads them; unset, 0 or a value the generator refuses means its
// default, one per CPU. It is read at each scrape because the size a worker
// started with goes stale: after `clusterapp scale 1` the worker left keeps
// the old count, and the pool looked degraded (desired above live) until it
// restarted. false when neither file can be read (the caller keeps the size
// it started with). It reads the one variable itself rather than through
// generator.Read, which validates through config.LoadVars and so swaps the
// process environment: not something to do in a serving worker at each
// scrape.
func configuredPoolSize(envFile string) (int, bool) {
	found, value := false, ""
	for _, path := range []string{envFile, config.ScaleFileFor(envFile)} {
		data, err := envfile.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, false
		}
		f, err := envfile.Parse(data)
		if err != nil {
			return 0, false
		}
		found = true
		if a, ok := f.Last(config.Prefix + "_WORKERS"); ok {
			value = a.Value
		}
	}
	if !found {
		return 0, false
	}
	plain := strings.TrimPrefix(value, "+")
	if n, err := strconv.Atoi(plain); err == nil && strconv.Itoa(n) == plain && n >= 1 && n <= config.MaxWorkers {
		return n, true
	}
	return runtime.NumCPU(), true
}

// exporterPoolSize is configuredPoolSize for the metrics exporter, which
// has no size of its own to fall back on: with neither file, it is the
// generator's default, one per CPU; with a file it cannot read, false (the
// newest worker's size is reported).
func exporterPoolSize(envFile string) (int, bool) {
	if n, ok := configuredPoolSize(envFile); ok {
		return n, true
	}
	for _, path := range []string{envFile, config.ScaleFileFor(envFile)} {
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			return 0, false
		}
	}
	return runtime.NumCPU(), true
}
