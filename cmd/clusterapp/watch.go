package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/clusterapp/clusterapp/service/app"
	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/ops/liveness"
	"github.com/clusterapp/clusterapp/service/ops/units"
	"github.com/clusterapp/clusterapp/service/worker"
	"github.com/clusterapp/clusterapp/service/worker/metrics"
)

// watchEvery is how often `status --watch` redraws.
const watchEvery = time.Second

// watchStatus is `status --watch`, the live view PM2 users open `pm2 monit`
// for: one line per worker (state, requests per second, in flight, p99
// latency, memory, restarts), redrawn in place every second until ctx ends
// (Ctrl-C). Rates and p99 are over the last interval, from the pool's
// metrics table (root: the table is the workers' own, mode 0600); without
// it those columns show "-".
func watchStatus(ctx context.Context, c *units.Client, out io.Writer) error {
	var prev map[int]metrics.Worker
	var prevAt time.Time
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, opTimeout)
		ws, err := c.Workers(qctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		now, cur := time.Now(), poolWorkers()
		var b strings.Builder
		b.WriteString("\x1b[H\x1b[2J") // home, clear: redraw in place
		fmt.Fprintf(&b, "clusterapp status --watch  %s  (Ctrl-C to quit)\n\n", now.Format(time.TimeOnly))
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "WORKER\tSTATE\tPID\tREQ/S\tIN-FLIGHT\tP99\tMEMORY\tRESTARTS\tHEALTH")
		var sick []workerHealth
		for _, w := range ws {
			v := liveness.Read(w)
			if !v.Healthy() {
				sick = append(sick, workerHealth{w.Number, w.PID, v})
			}
			rate, inFlight, p99, mem := "-", "-", "-", memory(w.MemoryBytes)
			if m, ok := cur[w.Number]; ok && w.Active() {
				inFlight = strconv.FormatUint(m.InFlight, 10)
				if mem == "-" {
					rss := m.RSS
					mem = memory(&rss)
				}
				if p, ok := prev[w.Number]; ok && m.PID == p.PID && m.Requests >= p.Requests {
					rate = strconv.FormatFloat(float64(m.Requests-p.Requests)/now.Sub(prevAt).Seconds(), 'f', 0, 64)
					p99 = quantile(0.99, p.Latency, m.Latency)
				}
			}
			fmt.Fprintf(tw, "%d\t%s/%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", w.Number, w.ActiveState, w.SubState, orDashInt(w.PID), rate, inFlight, p99, mem, w.Restarts, health(v))
		}
		if len(ws) == 0 {
			fmt.Fprintln(tw, "(no worker loaded)")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(sick) > 0 {
			b.WriteString("\n")
			_ = writeSick(&b, sick) // a strings.Builder does not fail
		}
		if _, err := io.WriteString(out, b.String()); err != nil {
			return err
		}
		prev, prevAt = cur, now
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// poolWorkers reads the live workers' numbers from the metrics table, by
// worker number; empty when the table cannot be read.
func poolWorkers() map[int]metrics.Worker {
	out := map[int]metrics.Worker{}
	m, err := metrics.View(config.RuntimeDir, worker.Labels(app.Routes))
	if err != nil {
		return out
	}
	defer m.Close()
	for _, w := range m.Workers() {
		out[w.Number] = w
	}
	return out
}

// quantile is the upper bound of the latency bucket holding the q-quantile
// of the requests between two snapshots ("≤25ms"), "-" without requests.
func quantile(q float64, before, after []uint64) string {
	bounds := metrics.DurationBounds()
	var total uint64
	delta := make([]uint64, len(after))
	for i := range after {
		if i < len(before) && after[i] >= before[i] {
			delta[i] = after[i] - before[i]
		}
		total += delta[i]
	}
	if total == 0 {
		return "-"
	}
	var seen uint64
	for i, d := range delta {
		seen += d
		if float64(seen) >= q*float64(total) {
			if i < len(bounds) {
				return "≤" + time.Duration(bounds[i]*float64(time.Second)).String()
			}
			return ">" + time.Duration(bounds[len(bounds)-1]*float64(time.Second)).String()
		}
	}
	return "-"
}
