package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/ops/doctor"
	"github.com/clusterapp/clusterapp/service/ops/liveness"
	"github.com/clusterapp/clusterapp/service/ops/sockstat"
	"github.com/clusterapp/clusterapp/service/ops/units"
	"github.com/clusterapp/clusterapp/service/worker/status"
	"github.com/spf13/cobra"
)

// statusReport is what `clusterapp status --json` prints.
type statusReport struct {
	Workers []workerStatus `json:"workers"`
	Socket  socketStatus   `json:"socket"`
}

type workerStatus struct {
	units.Worker
	UptimeSec *float64 `json:"uptime_sec"`
	// Served, InFlight and Queued are nil when the worker's STATUS= line
	// is not "serving: ..." (starting, draining, stopped); package status
	// says what they count.
	Served   *int64 `json:"served"`
	InFlight *int64 `json:"in_flight"`
	Queued   *int64 `json:"queued"`
	// RequestsTotal is every request the worker answered since the runtime
	// directory was created, over its restarts: the pool's metrics table,
	// the number Prometheus scrapes (clusterapp_http_requests_total). nil
	// when the worker is not running or the table cannot be read.
	RequestsTotal *uint64 `json:"requests_total"`
	// Health says whether the running worker makes progress: systemd
	// keeps a frozen or hung one active/running until its watchdog fires.
	Health liveness.Verdict `json:"health"`
}

type socketStatus struct {
	units.SocketState
	Queues []queueStatus `json:"queues"`
	// InUse are the socket's addresses another program listens on while
	// the socket is not active: why it cannot listen (doctor names who).
	InUse []string `json:"in_use_by_another_program,omitempty"`
}

type queueStatus struct {
	Address string `json:"address"`
	Waiting int    `json:"waiting"` // accepted by the kernel, not yet by a worker
}

// newStatusCommand prints one line per worker and the socket's state.
func newStatusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "One line per worker, and the socket's accept queue",
		Long: `One line per worker, from systemd (state, PID, uptime, restarts, memory, CPU), from
the worker itself (requests served by this process and in flight) and from the pool's
metrics table (requests answered across restarts), and its health: STOPPED (stopped
by a signal or a debugger) or STALLED (no watchdog ping for half of WatchdogSec: hung),
which systemd still calls active/running until its watchdog fires, explained under the
table; then clusterapp.socket and the connections waiting in its accept queue.

--watch redraws a live view every second until Ctrl-C: requests per second, in
flight, p99 latency, memory, restarts and health per worker.

Root reads systemd's private socket; members of the adm or systemd-journal group
read over the D-Bus system bus.`,
		Example: `  clusterapp status
  clusterapp status --json | jq '.workers[].in_flight'
  clusterapp status --watch`,
		Args: noArgs,
	}
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	watch := cmd.Flags().Bool("watch", false, "a live view redrawn every second (requests/s, in flight, p99, memory, restarts) until Ctrl-C")
	exclusiveFlags(cmd, "json", "watch")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runStatus(cmd.Context(), *asJSON, *watch, cmd.OutOrStdout())
	}
	return cmd
}

// runStatus prints the status once, as a table or JSON, or the live view.
func runStatus(ctx context.Context, asJSON, watch bool, stdout io.Writer) error {
	c, err := dialUnitsRead(ctx, "status")
	if err != nil {
		return err
	}
	defer c.Close()
	if watch {
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		return watchStatus(ctx, c, stdout)
	}
	report, err := collectStatus(ctx, c, time.Now())
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return writeStatus(stdout, report)
}

func collectStatus(ctx context.Context, c *units.Client, now time.Time) (statusReport, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var r statusReport
	ws, err := c.Workers(ctx)
	if err != nil {
		return r, err
	}
	pool := poolWorkers()
	for _, w := range ws {
		s := workerStatus{Worker: w, Health: liveness.Read(w)}
		if m, ok := pool[w.Number]; ok && w.Active() {
			n := m.Requests
			s.RequestsTotal = &n
		}
		if !w.Started.IsZero() {
			up := now.Sub(w.Started).Seconds()
			s.UptimeSec = &up
		}
		if load, ok := status.Parse(w.StatusText); ok && w.Active() {
			s.Served, s.InFlight, s.Queued = &load.Served, &load.InFlight, &load.Queued
		}
		r.Workers = append(r.Workers, s)
	}
	if r.Socket.SocketState, err = c.Socket(ctx); err != nil {
		return r, err
	}
	all, err := sockstat.ReadListeners()
	if err != nil {
		return r, err
	}
	r.Socket.Queues = []queueStatus{}
	for _, l := range doctor.OnPorts(all, r.Socket.Listen) {
		// A listener on the port of a socket that is not active is another
		// program's: its queue is not ours, and it is why ours is down.
		if r.Socket.ActiveState != "active" {
			r.Socket.InUse = append(r.Socket.InUse, l.Addr.String())
			continue
		}
		r.Socket.Queues = append(r.Socket.Queues, queueStatus{Address: l.Addr.String(), Waiting: l.Queued})
	}
	return r, nil
}

func writeStatus(w io.Writer, r statusReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tSTATE\tPID\tUPTIME\tRESTARTS\tMEMORY\tCPU\tSERVED\tREQUESTS\tIN-FLIGHT\tQUEUED\tHEALTH")
	var sick []workerHealth
	for _, s := range r.Workers {
		fmt.Fprintf(tw, "%d\t%s/%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Number, s.ActiveState, s.SubState,
			orDashInt(s.PID), uptime(s.UptimeSec), s.Restarts, memory(s.MemoryBytes), cpu(s.CPU), ptrInt(s.Served), ptrUint(s.RequestsTotal), ptrInt(s.InFlight), ptrInt(s.Queued), health(s.Health))
		if !s.Health.Healthy() {
			sick = append(sick, workerHealth{s.Number, s.PID, s.Health})
		}
	}
	if len(r.Workers) == 0 {
		fmt.Fprintln(tw, "(no worker loaded: the pool starts with the first connection, or systemctl start "+config.TargetUnit+")")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeSick(w, sick); err != nil {
		return err
	}
	s := r.Socket
	_, err := fmt.Fprintf(w, "\n%s: %s/%s, Backlog=%d\n", config.SocketUnit, s.ActiveState, s.SubState, s.Backlog)
	for _, q := range s.Queues {
		_, err = fmt.Fprintf(w, "  listening on %s: %d connections waiting to be accepted\n", q.Address, q.Waiting)
	}
	for _, addr := range s.InUse {
		_, err = fmt.Fprintf(w, "  not listening: %s is in use by another program (clusterapp doctor names it)\n", addr)
	}
	if len(s.Queues) == 0 && len(s.InUse) == 0 && len(s.Listen) > 0 {
		_, err = fmt.Fprintf(w, "  not listening in this network namespace (configured: %v)\n", s.Listen)
	}
	return err
}

func orDashInt(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func ptrInt(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

func ptrUint(p *uint64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatUint(*p, 10)
}

func uptime(sec *float64) string {
	if sec == nil {
		return "-"
	}
	d := time.Duration(*sec * float64(time.Second))
	switch {
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < 24*time.Hour:
		return d.Round(time.Second).String()
	}
	return fmt.Sprintf("%dd%s", int(d.Hours())/24, (d % (24 * time.Hour)).Round(time.Minute))
}

// memory prints bytes in IEC units, "-" when systemd has no value.
func memory(b *uint64) string {
	if b == nil {
		return "-"
	}
	v, unit := float64(*b), "B"
	for _, u := range []string{"K", "M", "G", "T"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + unit
}

func cpu(d *time.Duration) string {
	if d == nil {
		return "-"
	}
	return d.Round(10 * time.Millisecond).String()
}

// workerHealth is a worker whose health is a problem, for the notes under
// the table.
type workerHealth struct {
	number, pid int
	verdict     liveness.Verdict
}

// health is the HEALTH column: ok, "-" when not judged, and a problem in
// capitals, explained under the table (writeSick).
func health(v liveness.Verdict) string {
	if v.Healthy() {
		return v.State
	}
	return strings.ToUpper(v.State)
}

// writeSick says, under the table, what is wrong with each worker that is
// not making progress and since when: its state alone (active/running)
// would say it is fine.
func writeSick(w io.Writer, sick []workerHealth) error {
	for _, s := range sick {
		if _, err := fmt.Fprintf(w, "worker %d (pid %d): %s\n", s.number, s.pid, s.verdict.Problem); err != nil {
			return err
		}
	}
	return nil
}
