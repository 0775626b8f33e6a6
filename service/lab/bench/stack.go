package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// StackPlan is the handler stack against bare net/http, side by side: the
// pool's one-process configuration (BaselineName) on the shipped socket and
// the bare anchor (cmd/clusterapp-bare, the same routes on net/http alone)
// on its own port are up at once, and Route is loaded on one, then the
// other, Rounds times. Runs minutes apart on a shared machine move by more
// than the stack costs; alternating runs see the same drift.
type StackPlan struct {
	Route       string        // e.g. "/"
	Rounds      int           // default 1
	Concurrency int           // keep-alive connections
	Duration    time.Duration // of each run
}

// StackResult is the side-by-side runs: 2xx req/s of each round, or why the
// comparison was skipped (no bare anchor).
type StackResult struct {
	Route   string
	Pool    []float64
	Bare    []float64
	Skipped string `json:",omitempty"`
}

// Ratio is the pool's median over bare's (0 without runs).
func (s *StackResult) Ratio() float64 {
	if b := median(s.Bare); b > 0 {
		return median(s.Pool) / b
	}
	return 0
}

// stack measures plan.Stack with the bare anchor of plan.Anchors.
func (r *Runner) stack(ctx context.Context, plan Plan) (*StackResult, error) {
	sp := plan.Stack
	res := &StackResult{Route: sp.Route}
	var bare *Anchor
	if plan.Anchors != nil {
		for i, a := range plan.Anchors.Anchors {
			if a.Port == barePort {
				bare = &plan.Anchors.Anchors[i]
			}
		}
	}
	switch {
	case bare == nil:
		res.Skipped = "the plan has no bare net/http anchor"
	case bare.Skip != "":
		res.Skipped = bare.Skip
	}
	if res.Skipped != "" {
		r.logf(">> handler stack against bare net/http: skipped: %s", res.Skipped)
		return res, nil
	}
	baseline := baselineOf(plan)
	r.logf(">> handler stack: %s against bare net/http on %s, alternating", baseline.Name, sp.Route)
	if err := r.apply(ctx, baseline, 1); err != nil {
		return nil, err
	}
	if bare.prepare != nil {
		if err := bare.prepare(ctx, r.Box); err != nil {
			return nil, fmt.Errorf("handler stack: %w", err)
		}
	}
	stop, err := r.startAnchor(ctx, *bare)
	if err != nil {
		return nil, fmt.Errorf("handler stack: %w", err)
	}
	defer stop()
	flags := []string{"-c", strconv.Itoa(sp.Concurrency), "-d", sp.Duration.String(), "-keepalive=true"}
	for range max(sp.Rounds, 1) {
		for _, t := range []struct {
			url  string
			into *[]float64
		}{{sandbox.URL + sp.Route, &res.Pool}, {bare.base() + sp.Route, &res.Bare}} {
			run, err := r.loadURL(ctx, "", t.url, sp.Duration, flags...)
			if err != nil {
				return nil, fmt.Errorf("handler stack %s: %w", t.url, err)
			}
			*t.into = append(*t.into, Goodput(run))
		}
		r.logf("   round %d: %s %.1f req/s, bare %.1f req/s", len(res.Pool), baseline.Name, res.Pool[len(res.Pool)-1], res.Bare[len(res.Bare)-1])
	}
	return res, nil
}

// WriteStack writes the side-by-side runs and the ratio of their medians.
func WriteStack(w io.Writer, res *Results) {
	p := asPrinter(w)
	s := res.Stack
	if s.Skipped != "" {
		p.printf("Skipped: %s.\n", s.Skipped)
		return
	}
	p.printf("| round | %s: 2xx req/s | bare net/http: 2xx req/s | ratio |\n|---|---|---|---|\n", BaselineName)
	for i := range s.Pool {
		p.printf("| %d | %.1f | %.1f | %s |\n", i+1, s.Pool[i], s.Bare[i], Ratio(s.Pool[i], s.Bare[i]))
	}
	p.printf("| median | %.1f | %.1f | **%s** |\n", median(s.Pool), median(s.Bare), Ratio(median(s.Pool), median(s.Bare)))
}
