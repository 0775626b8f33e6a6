package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// StartABPlan compares the cold starts of several trees of the suite (a
// build with its units: a commit, or a change under study) in one box,
// taking turns, each start followed by one of bare net/http in the worker's
// unit. A start's reading moves by a fifth with the machine's hour and a
// few milliseconds from one start to the next, so a change worth 2-8 ms
// shows only against the other tree read in the same minutes, over many
// rounds (docs/benchmarks.md, notes, "The Prometheus client and the
// metrics socket at a cold start").
//
// Each round, every tree in turn (the order reversed every other round, so
// neither always follows the other): the pool's units stopped, the tree's
// bin/clusterapp, bin/clusterapp-worker and systemd/ units installed
// (scripts/sandbox install), the pool of the plan's start configuration
// started and ready, then a cold start as `make bench` times it
// (StartPlan), then bare's.
type StartABPlan struct {
	// Trees are repository trees with bin/ built (make build): the units
	// come from each tree's systemd/, the binaries from its bin/.
	Trees []string
	// Rounds: how many starts each tree gets; default 10.
	Rounds int
	// Start is what `systemctl start` starts in every tree (default: the
	// shipped sockets, as `make bench` does). A tree whose worker no longer
	// needs a unit shows that gain only when the start leaves it out.
	Start []string
}

// StartAB is the cold starts of every tree, in the order taken.
type StartAB struct {
	Trees   []string
	Start   []string // the units `systemctl start` started
	Workers int
	Runs    []StartABRun
	// BareSkipped says why no run has bare's start.
	BareSkipped string `json:",omitempty"`
}

// StartABRun is one tree's cold start in one round, with bare's next.
type StartABRun struct {
	Round, Tree int
	Pool        StartRun
	Bare        *StartRun `json:",omitempty"`
}

// roundOrder is the order of n trees in round (from 1): as given in odd
// rounds, reversed in even ones.
func roundOrder(n, round int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
		if round%2 == 0 {
			order[i] = n - 1 - i
		}
	}
	return order
}

// StartAB runs ab in the runner's box, whose tree (Box.Src) gives bare's
// units and binary; plan gives the CPUs, the pool's configuration
// (plan.Start.Config) and the bare anchor. The box is left with the last
// tree installed.
func (r *Runner) StartAB(ctx context.Context, plan Plan, ab StartABPlan) (*StartAB, error) {
	if len(ab.Trees) == 0 {
		return nil, errors.New("start A/B: no tree to start")
	}
	if plan.Start == nil {
		return nil, errors.New("start A/B: the plan has no start configuration")
	}
	workers, err := plan.Start.Config.Workers(plan.CPUs)
	if err != nil {
		return nil, err
	}
	start := ab.Start
	if len(start) == 0 {
		start = ColdStartUnits
	}
	rounds := ab.Rounds
	if rounds <= 0 {
		rounds = 10
	}
	res := &StartAB{Trees: ab.Trees, Start: start, Workers: workers}
	withBare, stopBare, skipped, err := r.bareStarts(ctx, plan)
	if err != nil {
		return nil, err
	}
	defer stopBare()
	res.BareSkipped = skipped
	pool := poolStarterOf(start)
	for round := 1; round <= rounds; round++ {
		for _, i := range roundOrder(len(ab.Trees), round) {
			r.logf(">> round %d of %d: tree %d (%s)", round, rounds, i+1, ab.Trees[i])
			if err := r.installTree(ctx, ab.Trees[i]); err != nil {
				return nil, err
			}
			if err := r.apply(ctx, plan.Start.Config, workers); err != nil {
				return nil, fmt.Errorf("tree %s: %w", ab.Trees[i], err)
			}
			run := StartABRun{Round: round, Tree: i}
			if run.Pool, err = r.coldStart(ctx, pool, workers); err != nil {
				return nil, fmt.Errorf("tree %s: %w", ab.Trees[i], err)
			}
			if withBare {
				b, err := r.coldStart(ctx, bareStarter, 0)
				if err != nil {
					return nil, err
				}
				run.Bare = &b
			}
			res.Runs = append(res.Runs, run)
		}
	}
	return res, nil
}

// poolStarterOf is poolStarter with start as what `systemctl start` starts.
func poolStarterOf(start []string) starter {
	s := poolStarter
	s.script = coldStartScript(poolStopped, start, serviceHost, servicePort) + coldStartAfter
	return s
}

// installTree stops the pool (a running worker's executable cannot be
// overwritten) and installs tree's binaries and units in the box.
func (r *Runner) installTree(ctx context.Context, tree string) error {
	if _, err := r.Box.Exec(ctx, time.Minute, "sh", "-c", "systemctl stop "+quoteUnits(poolStopped)+" 2>/dev/null; true"); err != nil {
		return fmt.Errorf("stop the pool: %w", err)
	}
	d := *r.Box
	d.Src = tree
	if err := d.Install(ctx); err != nil {
		return fmt.Errorf("install %s: %w", tree, err)
	}
	return nil
}

// WriteStartAB writes every start, then each tree's medians: its first 200
// and moments, bare's next, the median of the pool-less-bare pairs, and,
// from the second tree on, the median of the round-by-round differences
// with the first tree and how many rounds it was the faster.
func WriteStartAB(w io.Writer, res *StartAB) {
	p := asPrinter(w)
	p.printf("Cold starts of %d trees in one box, %d workers, `systemctl start %s`, taking turns:\n\n", len(res.Trees), res.Workers, joinUnits(res.Start))
	p.printf("| round | tree | first 200 | sockets listening | worker 1 \"Starting\" | worker 1 READY=1 | bare next: first 200 |\n|---|---|---|---|---|---|---|\n")
	for _, run := range res.Runs {
		bare := "–"
		if run.Bare != nil {
			bare = Millis(run.Bare.FirstOK)
		}
		p.printf("| %d | %d | %s | %s | %s | %s | %s |\n", run.Round, run.Tree+1, Millis(run.Pool.FirstOK), Millis(run.Pool.Listening),
			Millis(run.Pool.Starting), Millis(run.Pool.Ready), bare)
	}
	if res.BareSkipped != "" {
		p.printf("\nBare net/http in the worker's unit: skipped: %s.\n", res.BareSkipped)
	}
	p.printf("\n| tree | starts | first 200, median | sockets listening | \"Starting\" | READY=1 | bare next | pool less bare, median of pairs | less tree 1, median of rounds | rounds faster than tree 1 |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for i, tree := range res.Trees {
		s := summarize(res, i)
		p.printf("| %d `%s` | %d | **%s** | %s | %s | %s | %s | %s | %s | %s |\n", i+1, tree, s.starts, Millis(s.first), Millis(s.listening),
			Millis(s.starting), Millis(s.ready), Millis(s.bare), s.lessBare, s.lessFirst, s.faster)
	}
}

// treeSummary is one tree's medians in WriteStartAB's terms.
type treeSummary struct {
	starts                                  int
	first, listening, starting, ready, bare time.Duration
	lessBare, lessFirst, faster             string // "–" where there is nothing to compare
}

func summarize(res *StartAB, tree int) treeSummary {
	var first, listening, starting, ready, bare, lessBare, lessFirst []float64
	faster := 0
	firstTree := map[int]time.Duration{} // round: tree 1's first 200
	for _, run := range res.Runs {
		if run.Tree == 0 {
			firstTree[run.Round] = run.Pool.FirstOK
		}
	}
	for _, run := range res.Runs {
		if run.Tree != tree {
			continue
		}
		first, listening = append(first, float64(run.Pool.FirstOK)), append(listening, float64(run.Pool.Listening))
		starting, ready = append(starting, float64(run.Pool.Starting)), append(ready, float64(run.Pool.Ready))
		if run.Bare != nil {
			bare = append(bare, float64(run.Bare.FirstOK))
			lessBare = append(lessBare, float64(run.Pool.FirstOK-run.Bare.FirstOK))
		}
		if f, ok := firstTree[run.Round]; ok && tree != 0 {
			lessFirst = append(lessFirst, float64(run.Pool.FirstOK-f))
			if run.Pool.FirstOK < f {
				faster++
			}
		}
	}
	s := treeSummary{
		starts: len(first), first: time.Duration(median(first)), listening: time.Duration(median(listening)),
		starting: time.Duration(median(starting)), ready: time.Duration(median(ready)), bare: time.Duration(median(bare)),
		lessBare: "–", lessFirst: "–", faster: "–",
	}
	if len(lessBare) > 0 {
		s.lessBare = signedMillis(time.Duration(median(lessBare)))
	}
	if len(lessFirst) > 0 {
		s.lessFirst = signedMillis(time.Duration(median(lessFirst)))
		s.faster = fmt.Sprintf("%d of %d", faster, len(lessFirst))
	}
	return s
}

// signedMillis is Millis with the sign written: "+3.50 ms", "-8.20 ms",
// "0 ms".
func signedMillis(d time.Duration) string {
	switch {
	case d > 0:
		return "+" + Millis(d)
	case d < 0:
		return "-" + Millis(-d)
	}
	return "0 ms"
}
