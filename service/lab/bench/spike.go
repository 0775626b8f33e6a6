package bench

import (
	"fmt"
	"io"
	"strings"
)

func writeSpikeMethod(p *printer, res *Results) {
	sp, s := res.Plan.Spike, res.Spike
	p.printf("- Layout: %s. The tables above share every CPU with the generator; this section does not.\n", sp.Layout.Describe())
	p.printf("- Sustainable rate: the closed-loop 2xx rate of `%s` with protection off (nothing turned away;\n", sp.Route)
	p.printf("  `-c %d -keepalive -d %s`, same layout), **%.1f req/s**.\n", res.Plan.Concurrency, res.Plan.Cell, s.Sustainable)
	p.printf("- Spike: **%g req/s** offered (%gx) at a fixed rate for %s (`-rate %g -c %d -timeout %s`); latency from the\n",
		s.Offered, sp.Factor, sp.Duration, s.Offered, sp.Concurrency, sp.Timeout)
	p.printf("  intended send time, so time spent waiting for one of the %d connections counts too.\n", sp.Concurrency)
	p.printf("- Unloaded p99: the same route at %g req/s (`-c 8`, %s) just before, under \"%s\".\n", s.Unloaded.Rate, sp.Duration, sp.On.Name)
	if n := len(s.Rounds); n > 1 {
		p.printf("- Rounds: \"%s\" runs %d times, each spike just after an unloaded run of its own; its column is the round\n", sp.On.Name, n)
		p.printf("  whose admitted p99 × unloaded p99 is the median (round %d), and the rows \"each round\" list all %d.\n", s.Median+1, n)
	}
	p.printf("- Time to reject: latency of the non-2xx responses (`non_2xx_latency` of the generator).\n")
	p.printf("- Health probe: a second generator sends `/healthz` at %d req/s (`-c 4`) during each spike, from the same CPU:\n", healthProbe)
	p.printf("  what a load balancer's health check sees, and the floor for a request that does no work.\n")
	p.printf("- **Result cache: OFF** in both runs. Configurations:\n")
	for _, run := range s.Runs {
		p.printf("  - %s: `%s` — %s\n", run.Config.Name, strings.ReplaceAll(strings.TrimSpace(run.Config.Env), "\n", "` `"), run.Config.Note)
	}
	p.printf("\n")
}

// WriteSpike writes the spike table: one column per run.
func WriteSpike(w io.Writer, res *Results) {
	p := asPrinter(w)
	s := res.Spike
	unloadedP99 := s.Unloaded.Latency.P99
	header, sep := "| |", "|---|"
	for _, run := range s.Runs {
		header += " " + run.Config.Name + " |"
		sep += "---|"
	}
	p.printf("%s\n%s\n", header, sep)
	row := func(label string, cell func(SpikeRun) string) {
		line := "| " + label + " |"
		for _, run := range s.Runs {
			line += " " + cell(run) + " |"
		}
		p.printf("%s\n", line)
	}
	offered := int(s.Offered * res.Plan.Spike.Duration.Seconds())
	row(fmt.Sprintf("requests sent (of %d offered)", offered), func(r SpikeRun) string { return fmt.Sprint(r.Result.Requests) })
	row("not sent: every connection busy until the end", func(r SpikeRun) string { return fmt.Sprint(max(offered-r.Result.Requests, 0)) })
	row("200 (admitted)", func(r SpikeRun) string { return fmt.Sprint(r.Result.OK) })
	row("turned away (non-2xx)", func(r SpikeRun) string { return statusList(r.Result.StatusCodes) })
	row("errors", func(r SpikeRun) string { return Errors(r.Result) })
	row("2xx req/s × sustainable", func(r SpikeRun) string { return Ratio(Goodput(r.Result), s.Sustainable) })
	row("admitted p50 / p99", func(r SpikeRun) string {
		return Millis(r.Result.Latency.P50) + " / " + Millis(r.Result.Latency.P99)
	})
	row(fmt.Sprintf("admitted p99 × unloaded p99 (%s)", Millis(unloadedP99)), func(r SpikeRun) string {
		return Ratio(float64(r.Result.Latency.P99), float64(unloadedP99))
	})
	if len(s.Rounds) > 1 {
		// Rounds are of the protected configuration, the first column.
		each := func(label string, cell func(SpikeRound) string) {
			var parts []string
			for i, sr := range s.Rounds {
				v := cell(sr)
				if i == s.Median {
					v = "**" + v + "**"
				}
				parts = append(parts, v)
			}
			line := "| each round: " + label + " | " + strings.Join(parts, ", ") + " |"
			for range s.Runs[1:] {
				line += " one round |"
			}
			p.printf("%s\n", line)
		}
		each("admitted p99 × unloaded p99 (unloaded p99)", func(sr SpikeRound) string {
			return fmt.Sprintf("%s (%s)", Ratio(float64(sr.Run.Result.Latency.P99), float64(sr.Unloaded.Latency.P99)), Millis(sr.Unloaded.Latency.P99))
		})
		each("time to reject p50", func(sr SpikeRound) string { return Millis(sr.Run.Result.Non2xxLatency.P50) })
		each("`/healthz` p99", func(sr SpikeRound) string {
			if sr.Run.Health == nil {
				return "–"
			}
			return Millis(sr.Run.Health.Latency.P99)
		})
		each("2xx req/s × sustainable", func(sr SpikeRound) string { return Ratio(Goodput(sr.Run.Result), s.Sustainable) })
	}
	row("time to reject p50 / p90 / p99 / max", func(r SpikeRun) string {
		n := r.Result.Non2xxLatency
		if r.Result.Responses == r.Result.OK {
			return "none rejected"
		}
		return Millis(n.P50) + " / " + Millis(n.P90) + " / " + Millis(n.P99) + " / " + Millis(n.Max)
	})
	row("`/healthz` during the spike: p50 / p90 / p99 / max (non-2xx, errors)", func(r SpikeRun) string {
		if r.Health == nil {
			return "–"
		}
		l := r.Health.Latency
		return fmt.Sprintf("%s / %s / %s / %s (%d, %s)", Millis(l.P50), Millis(l.P90), Millis(l.P99), Millis(l.Max), r.Health.Responses-r.Health.OK, Errors(r.Health))
	})
	row("GOMAXPROCS per worker as the spike begins (`/metrics`)", func(r SpikeRun) string { return gomaxprocs(r.GOMAXPROCS) })
	row("worker restarts (NRestarts, PID changes)", func(r SpikeRun) string { return restarts(r.Before, r.After) })
	row("VmRSS after (peak VmHWM) per worker", func(r SpikeRun) string {
		var parts []string
		for _, wk := range r.After {
			parts = append(parts, fmt.Sprintf("%s (%s)", MiB(wk.RSS), MiB(wk.PeakRSS)))
		}
		return strings.Join(parts, "; ")
	})
}

// statusList formats the non-2xx status counts, e.g. "503: 1200"; "0" if none.
func statusList(codes map[int]int) string {
	var parts []string
	for code := 100; code < 600; code++ {
		if n := codes[code]; n > 0 && (code < 200 || code > 299) {
			parts = append(parts, fmt.Sprintf("%d: %d", code, n))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

// restarts compares workers before and after a run: NRestarts added and main
// processes replaced, e.g. "0" or "2 (@1 pid 120→188)".
func restarts(before, after []Worker) string {
	total, changed := 0, []string{}
	for i, a := range after {
		if i >= len(before) {
			break
		}
		total += a.Restarts - before[i].Restarts
		if a.PID != before[i].PID {
			changed = append(changed, fmt.Sprintf("@%s pid %d→%d", instance(a.Unit), before[i].PID, a.PID))
		}
	}
	if len(changed) == 0 {
		return fmt.Sprint(total)
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(changed, ", "))
}
