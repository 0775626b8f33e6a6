package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// Anchor is a program outside the suite, measured on the curve's cells in
// the same box, by the same generator, in the same run: what the pool is
// worth against the world. Each runs inside the box as a transient unit
// (systemd-run) on a port of its own while the pool is stopped.
type Anchor struct {
	Name string
	Note string
	Port int
	// Routes it serves; a cell on another route is left out ("–").
	Routes []string
	// Argv and Env start it inside the box.
	Argv []string
	Env  []string
	// Skip says why it is not measured ("" when it is): a program that is
	// missing is named, never silently left out.
	Skip string
	// prepare copies what the anchor needs into the box; nil when nothing.
	prepare func(ctx context.Context, box *sandbox.Driver) error
}

// AnchorPlan lists the anchors; they are measured on Plan.Curve's cells.
type AnchorPlan struct {
	Anchors []Anchor
	// Repeats is each cell's runs; 0 means the curve's. The anchors place
	// the pool in the world and carry no target, so they can run fewer
	// times than the curve, whose ratios the targets read.
	Repeats int
}

// repeats is each cell's runs: the plan's, else the curve's.
func (ap *AnchorPlan) repeats(cp *CurvePlan) int {
	if ap.Repeats > 0 {
		return ap.Repeats
	}
	return max(cp.Repeats, 1)
}

// AnchorResult is one anchor's measurements (Cells in the order of the
// curve's, nil where it does not serve the route), or why it was skipped.
type AnchorResult struct {
	Name, Note string
	Skipped    string
	Cells      []*CurveCellResult
}

// anchorUnit is the transient unit an anchor runs as inside the box.
const anchorUnit = "clusterapp-anchor.service"

// Anchor ports inside the box.
const (
	barePort  = 18090
	nginxPort = 18091
	nodePort  = 18092
	pm2Port   = 18093
)

// bareAnchor is plan's bare net/http anchor, or why there is none.
func bareAnchor(plan Plan) (*Anchor, string) {
	if plan.Anchors != nil {
		for i, a := range plan.Anchors.Anchors {
			if a.Port != barePort {
				continue
			}
			if a.Skip != "" {
				return nil, a.Skip
			}
			return &plan.Anchors.Anchors[i], ""
		}
	}
	return nil, "the plan has no bare net/http anchor"
}

// DefaultAnchors returns the anchors of issue 12 for a machine with cpus
// CPUs: the seed routes on bare net/http (cmd/clusterapp-bare), Debian's
// nginx answering `return 200` (the fast path only), and the seed
// application in Express under Node's cluster module and under PM2, one
// worker per CPU. repo is the tree whose bin/ and scripts/anchors are used;
// lookPath finds programs on the host (exec.LookPath), whose / the box
// shares.
func DefaultAnchors(repo string, cpus int, lookPath func(string) (string, error)) []Anchor {
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	bare := Anchor{
		Name: "bare net/http", Port: barePort, Routes: []string{"/", "/fib?n=25", "/fib?n=30", "/slow"},
		Note: "cmd/clusterapp-bare: the same routes on net/http alone, one process, GOMAXPROCS left to Go",
		Argv: []string{"/usr/local/bin/clusterapp-bare", "-listen", fmt.Sprintf("127.0.0.1:%d", barePort)},
		prepare: func(ctx context.Context, box *sandbox.Driver) error {
			return box.Copy(ctx, filepath.Join(repo, "bin", "clusterapp-bare"), "/usr/local/bin/clusterapp-bare")
		},
	}
	if _, err := os.Stat(filepath.Join(repo, "bin", "clusterapp-bare")); err != nil {
		bare.Skip = "bin/clusterapp-bare is missing (make build)"
	}
	nginx := Anchor{
		Name: "nginx `return 200`", Port: nginxPort, Routes: []string{"/"},
		Note: fmt.Sprintf("Debian's nginx, %d worker processes, `return 200` with the same body, access log off: the fast path's ceiling", cpus),
		Argv: []string{"nginx", "-c", "/tmp/anchor-nginx.conf", "-g", "daemon off;"},
		prepare: func(ctx context.Context, box *sandbox.Driver) error {
			return box.WriteFile(ctx, "/tmp/anchor-nginx.conf", nginxConf(cpus))
		},
	}
	if _, err := lookPath("nginx"); err != nil {
		nginx.Skip = "nginx is not installed (apt-get install nginx)"
	}
	nodeDir := filepath.Join(repo, "bin", "node-anchor")
	node := Anchor{
		Name: "Node cluster (Express)", Port: nodePort, Routes: []string{"/", "/fib?n=25", "/fib?n=30", "/slow"},
		Note: fmt.Sprintf("scripts/anchors/node: the seed application in Express under Node's cluster module, %d workers (round-robin from the primary)", cpus),
		Argv: []string{"node", "/tmp/node-anchor/cluster.js"},
		Env:  []string{fmt.Sprintf("PORT=%d", nodePort), fmt.Sprintf("WORKERS=%d", cpus)},
	}
	pm2 := Anchor{
		Name: "PM2 cluster (Express)", Port: pm2Port, Routes: node.Routes,
		Note: fmt.Sprintf("the same application under PM2's cluster mode (`pm2-runtime`), %d instances", cpus),
		Argv: []string{"node", "/tmp/node-anchor/node_modules/pm2/bin/pm2-runtime", "start", "/tmp/node-anchor/ecosystem.config.js"},
		Env:  []string{fmt.Sprintf("PORT=%d", pm2Port), fmt.Sprintf("WORKERS=%d", cpus), "PM2_HOME=/tmp/pm2", "HOME=/tmp"},
	}
	copyNode := func(ctx context.Context, box *sandbox.Driver) error {
		return copyTree(ctx, box, nodeDir, "/tmp/node-anchor")
	}
	node.prepare, pm2.prepare = copyNode, copyNode
	switch _, err := lookPath("node"); {
	case err != nil:
		node.Skip, pm2.Skip = "node is not installed (apt-get install nodejs npm)", "node is not installed (apt-get install nodejs npm)"
	default:
		if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "express")); err != nil {
			node.Skip = "Express is not installed in bin/node-anchor (`make bench` runs npm ci there; did it fail?)"
		}
		if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "pm2")); err != nil {
			pm2.Skip = "PM2 is not installed in bin/node-anchor (`make bench` runs npm ci there; did it fail?)"
		}
	}
	return []Anchor{bare, nginx, node, pm2}
}

func nginxConf(cpus int) string {
	return fmt.Sprintf(`# make bench's nginx anchor: the fast path's ceiling on this machine.
worker_processes %d;
pid /tmp/anchor-nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:%d;
        location / { default_type text/plain; return 200 "Hello World!\n"; }
    }
}
`, cpus, nginxPort)
}

// anchors measures every anchor that is not skipped on the curve's cells.
func (r *Runner) anchors(ctx context.Context, plan Plan) ([]AnchorResult, error) {
	if _, err := r.Box.Exec(ctx, time.Minute, "systemctl", "stop", config.TargetUnit, config.WorkerPattern); err != nil {
		return nil, fmt.Errorf("anchors: stop the pool: %w", err)
	}
	var out []AnchorResult
	for _, a := range plan.Anchors.Anchors {
		res := AnchorResult{Name: a.Name, Note: a.Note, Skipped: a.Skip}
		if a.Skip == "" {
			cells, err := r.anchor(ctx, plan, a)
			if errors.Is(err, errAnchorDidNotStart) {
				res.Skipped = err.Error() // the world's program failed, not ours: say so and go on
				r.logf("   %s: skipped: %v", a.Name, err)
			} else if err != nil {
				return nil, err
			}
			res.Cells = cells
		} else {
			r.logf(">> anchor %s: skipped: %s", a.Name, a.Skip)
		}
		out = append(out, res)
	}
	return out, nil
}

var errAnchorDidNotStart = errors.New("did not start")

func (r *Runner) anchor(ctx context.Context, plan Plan, a Anchor) ([]*CurveCellResult, error) {
	cp := plan.Curve
	r.logf(">> anchor %s on 127.0.0.1:%d", a.Name, a.Port)
	if a.prepare != nil {
		if err := a.prepare(ctx, r.Box); err != nil {
			return nil, fmt.Errorf("anchor %s: %w", a.Name, err)
		}
	}
	stop, err := r.startAnchor(ctx, a)
	if err != nil {
		return nil, err
	}
	defer stop()
	base := a.base()
	var cells []*CurveCellResult
	for _, cell := range cp.Cells {
		if !slices.Contains(a.Routes, cell.Route) || cell.Workers != nil {
			cells = append(cells, nil) // not served, or no pool at N = CPUs to compare with
			continue
		}
		cr := &CurveCellResult{Cell: cell}
		for range plan.Anchors.repeats(cp) {
			res, err := r.loadURL(ctx, "", base+cell.Route, cp.Duration, "-c", strconv.Itoa(cp.Concurrency), "-d", cp.Duration.String(),
				"-keepalive="+strconv.FormatBool(cell.KeepAlive))
			if err != nil {
				return nil, fmt.Errorf("anchor %s %s: %w", a.Name, cell, err)
			}
			cr.Runs = append(cr.Runs, CurveRun{Result: res})
		}
		rate, _, _ := cr.Median()
		r.logf("   %-28s %8.1f req/s", cell, rate)
		cells = append(cells, cr)
	}
	return cells, nil
}

// base is the anchor's URL without a path.
func (a Anchor) base() string { return fmt.Sprintf("http://127.0.0.1:%d", a.Port) }

// startAnchor starts a as the transient unit anchorUnit and waits until it
// answers its first route; stop stops it.
func (r *Runner) startAnchor(ctx context.Context, a Anchor) (stop func(), err error) {
	argv := []string{"systemd-run", "--quiet", "--collect", "--unit=" + anchorUnit, "--property=KillMode=control-group"}
	for _, e := range a.Env {
		argv = append(argv, "--setenv="+e)
	}
	if _, err := r.Box.Exec(ctx, time.Minute, append(argv, a.Argv...)...); err != nil {
		return nil, fmt.Errorf("anchor %s: %w: %v", a.Name, errAnchorDidNotStart, err)
	}
	stop = func() { _, _ = r.Box.Exec(context.Background(), time.Minute, "systemctl", "stop", anchorUnit) }
	if err := r.Box.WaitServing(ctx, a.base()+a.Routes[0], 20*time.Second); err != nil {
		logs, _ := r.Box.Exec(ctx, 10*time.Second, "journalctl", "-u", anchorUnit, "-n", "5", "--no-pager", "-o", "cat")
		stop()
		return nil, fmt.Errorf("%w within 20 s: %v; its journal: %s", errAnchorDidNotStart, err, strings.TrimSpace(logs))
	}
	return stop, nil
}

// copyTree copies the host directory dir into the box at to, as one tar
// stream through a temporary file.
func copyTree(ctx context.Context, box *sandbox.Driver, dir, to string) error {
	f, err := os.CreateTemp("", "clusterapp-bench-tree-*.tar")
	if err != nil {
		return fmt.Errorf("copy %s: %w", dir, err)
	}
	defer os.Remove(f.Name())
	tar := exec.CommandContext(ctx, "tar", "-C", dir, "-cf", "-", ".")
	tar.Stdout = f
	var stderr strings.Builder
	tar.Stderr = &stderr
	if err := tar.Run(); err != nil {
		_ = f.Close()
		return fmt.Errorf("copy %s: tar: %w: %s", dir, err, stderr.String())
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("copy %s: %w", dir, err)
	}
	if err := box.Copy(ctx, f.Name(), "/tmp/anchor-tree.tar"); err != nil {
		return err
	}
	_, err = box.Exec(ctx, time.Minute, "sh", "-c", "rm -rf "+to+" && mkdir -p "+to+" && tar -C "+to+" -xf /tmp/anchor-tree.tar && rm -f /tmp/anchor-tree.tar")
	return err
}

// WriteAnchors writes the table against the world: the pool at N = CPUs
// and one process (from the curve) beside each anchor, per cell, as 2xx
// req/s and the ratio to the pool.
func WriteAnchors(w io.Writer, res *Results) {
	p := asPrinter(w)
	c := res.Curve
	pool := curvePointFor(c, res.Machine.CPUs)
	if pool == nil {
		p.printf("The curve has no point at N = %d CPUs to compare with.\n", res.Machine.CPUs)
		return
	}
	var cells []int // the cells run at every point: the others have no pool at N = CPUs
	p.printf("| program |")
	for i, cell := range res.Plan.Curve.Cells {
		if cell.Workers == nil {
			cells = append(cells, i)
			p.printf(" %s: 2xx req/s (× pool) |", cell)
		}
	}
	p.printf("\n|---|")
	for range cells {
		p.printf("---|")
	}
	p.printf("\n")
	row := func(name string, get func(i int) *CurveCellResult) {
		p.printf("| %s |", name)
		for _, i := range cells {
			cr := get(i)
			if cr == nil || len(cr.Runs) == 0 {
				p.printf(" – |")
				continue
			}
			rate, _, _ := cr.Median()
			base, _, _ := pool.Cells[i].Median()
			p.printf(" %.1f (%s) |", rate, Ratio(rate, base))
		}
		p.printf("\n")
	}
	row(fmt.Sprintf("clusterapp pool, %d workers", pool.Workers), func(i int) *CurveCellResult { return &pool.Cells[i] })
	row("clusterapp, "+BaselineName, func(i int) *CurveCellResult { return &c.Baseline.Cells[i] })
	for _, a := range res.Anchors {
		if a.Skipped != "" {
			continue
		}
		row(a.Name, func(i int) *CurveCellResult {
			if i < len(a.Cells) {
				return a.Cells[i]
			}
			return nil
		})
	}
	p.printf("\n")
	for _, a := range res.Anchors {
		if a.Skipped != "" {
			p.printf("- %s: **skipped**: %s\n", a.Name, a.Skipped)
		} else {
			p.printf("- %s: %s\n", a.Name, a.Note)
		}
	}
}

func curvePointFor(c *CurveResult, workers int) *CurvePoint {
	if c == nil {
		return nil
	}
	for i := range c.Points {
		if c.Points[i].Workers == workers {
			return &c.Points[i]
		}
	}
	return nil
}
