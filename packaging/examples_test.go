package packaging_test

// The operator files in packaging/examples/, shipped in /usr/share/doc/clusterapp/examples/:
// Prometheus rules (recording rules and alerts) with their promtool unit tests, a scrape config
// and a Grafana dashboard. promtool (Debian's prometheus package) checks the YAML and PromQL;
// these tests add what promtool cannot see: that the dashboard plots the very series the alerts
// fire on, that every name used exists on the metrics listener, and that nfpm ships every file.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/worker/metrics"
)

// exposedMetrics is the name of every metric the metrics listener serves (a histogram by its base
// name): the rules and the dashboard are checked against what the code really exposes.
var exposedMetrics = metrics.Names()

// prometheusSeries are the series Prometheus adds to every scrape itself.
var prometheusSeries = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped"}

// installedRules is where the scrape example expects the rules: the package's doc directory.
const installedRules = "/usr/share/doc/clusterapp/examples/clusterapp-alerts.yml"

func examplePath(name string) string { return filepath.Join(repoRoot, "packaging", "examples", name) }

// promtool runs promtool and returns its combined output. A missing promtool fails the test
// rather than skipping it: the shipped rules would go out unchecked.
func promtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatal("promtool is not installed: apt-get install prometheus (make test installs it)")
	}
	out, err := exec.Command("promtool", args...).CombinedOutput()
	return string(out), err
}

func TestExampleRulesPromtool(t *testing.T) {
	t.Parallel()
	file := examplePath("clusterapp-alerts.yml")
	out, err := promtool(t, "check", "rules", file)
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	// The other tests read the rules with readRules: it must see every rule promtool sees.
	m := regexp.MustCompile(`SUCCESS: (\d+) rules found`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("promtool check rules did not count the rules:\n%s", out)
	}
	if n, _ := strconv.Atoi(m[1]); n != len(readRules(t)) {
		t.Errorf("promtool finds %d rules, readRules %d: fix readRules for the file's layout", n, len(readRules(t)))
	}
	if out, err := promtool(t, "test", "rules", examplePath("clusterapp-alerts_test.yml")); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestExampleRulesConventions checks what an operator relies on in every alert, and that the
// unit tests cover each one both ways.
func TestExampleRulesConventions(t *testing.T) {
	tests := alertTests(t)
	for _, r := range readRules(t) {
		if r.kind != "alert" {
			continue
		}
		if r.severity != "critical" && r.severity != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.name, r.severity)
		}
		for key, value := range map[string]string{"summary": r.summary, "description": r.description, "runbook": r.runbook} {
			if value == "" {
				t.Errorf("%s has no %s annotation", r.name, key)
			}
		}
		forDuration, err := parseDuration(r.forDuration)
		if err != nil {
			t.Errorf("%s: for: %v", r.name, err)
		}
		// The sandbox test under real systemd waits for these two to fire.
		if (r.name == "ClusterappDegraded" || r.name == "ClusterappWatchdogKill") && forDuration > 60 {
			t.Errorf("%s: for: %s, want at most 1m", r.name, r.forDuration)
		}
		if !tests[r.name].fires || !tests[r.name].quiet {
			t.Errorf("%s: clusterapp-alerts_test.yml needs a case where it fires and one where it does not (has: %+v)", r.name, tests[r.name])
		}
	}
}

// TestExampleSLOWindowsAlike: the burn-rate alerts compare the same ratio over seven windows,
// so the seven recording rules must differ in their window only.
func TestExampleSLOWindowsAlike(t *testing.T) {
	window := regexp.MustCompile(`^clusterapp:http_request_slow:ratio_rate(\w+)$`)
	var first rule
	var windows []string
	for _, r := range readRules(t) {
		m := window.FindStringSubmatch(r.name)
		if m == nil {
			continue
		}
		windows = append(windows, m[1])
		generic := strings.ReplaceAll(r.expr, "["+m[1]+"]", "[WINDOW]")
		if first.name == "" {
			first, first.expr = r, generic
		} else if generic != first.expr {
			t.Errorf("%s differs from %s in more than its window:\n%s\n%s", r.name, first.name, generic, first.expr)
		}
	}
	if want := []string{"5m", "30m", "1h", "2h", "6h", "1d", "3d"}; !slices.Equal(windows, want) {
		t.Errorf("latency SLO windows %v, want %v", windows, want)
	}
}

// TestExampleDashboardMatchesAlerts: every series an alert reads is on the dashboard, and both
// read the recording rules rather than computing the same ratio twice in two styles.
func TestExampleDashboardMatchesAlerts(t *testing.T) {
	rules := readRules(t)
	var dashboardNames []string
	var dashboardExprs []string
	for _, q := range dashboardQueries(t) {
		dashboardExprs = append(dashboardExprs, q.expr)
		dashboardNames = append(dashboardNames, seriesNames(q.expr)...)
	}
	rangeCall := regexp.MustCompile(`\b(rate|irate|increase|delta|idelta|deriv|histogram_quantile|\w+_over_time)\s*\(`)
	// rawNames are the exposed series a recording rule reads, through the rules it reads.
	recorded := map[string]string{}
	for _, r := range rules {
		if r.kind == "record" {
			recorded[r.name] = r.expr
		}
	}
	var rawNames func(expr string) []string
	rawNames = func(expr string) []string {
		var raw []string
		for _, name := range seriesNames(expr) {
			if inner, ok := recorded[name]; ok {
				raw = append(raw, rawNames(inner)...)
			} else {
				raw = append(raw, name)
			}
		}
		return raw
	}
	for _, r := range rules {
		switch r.kind {
		case "alert":
			// An alert computes nothing over time itself: a windowed value it tests is a
			// recording rule, so the dashboard can plot exactly that number.
			if rangeCall.MatchString(r.expr) {
				t.Errorf("alert %s computes %q itself: record it in a rule and use that in the alert and the dashboard", r.name, rangeCall.FindString(r.expr))
			}
			for _, name := range seriesNames(r.expr) {
				if !slices.Contains(dashboardNames, name) {
					t.Errorf("alert %s reads %s, which no dashboard panel shows", r.name, name)
				}
			}
		case "record":
			// A dashboard query that reads every raw series of a ratio rule re-derives the ratio
			// by hand: it must plot the recorded series instead.
			raw := rawNames(r.expr)
			if len(slices.Compact(slices.Sorted(slices.Values(raw)))) < 2 {
				continue
			}
			for _, expr := range dashboardExprs {
				if names := seriesNames(expr); !slices.Contains(names, r.name) && containsAll(names, raw) {
					t.Errorf("dashboard query %q recomputes %s: plot %s", expr, r.name, r.name)
				}
			}
		}
	}
}

// TestExampleMetricNames: the rules and the dashboard use only series the metrics listener
// exposes, Prometheus adds, or the rules record.
func TestExampleMetricNames(t *testing.T) {
	known := map[string]bool{}
	for _, name := range exposedMetrics {
		known[name] = true
		// A histogram's series; extra names for the others are harmless.
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			known[name+suffix] = true
		}
	}
	for _, name := range prometheusSeries {
		known[name] = true
	}
	rules := readRules(t)
	for _, r := range rules {
		if r.kind == "record" {
			known[r.name] = true
		}
	}
	check := func(where, expr string) {
		names := seriesNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: no series found in %q", where, expr)
		}
		for _, name := range names {
			if !known[name] {
				t.Errorf("%s reads %s, which the metrics listener does not expose (issue 13's metric spec) and no rule records", where, name)
			}
		}
	}
	for _, r := range rules {
		check(r.kind+" "+r.name, r.expr)
	}
	for _, q := range dashboardQueries(t) {
		check(q.where, q.expr)
	}
}

// TestExampleDashboard checks the dashboard's shape and that every query is valid PromQL, by
// handing them to promtool as one recording rule each.
func TestExampleDashboard(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: Grafana 9 writes 36 and later", d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	for name, kind := range map[string]string{"DS_PROMETHEUS": "datasource", "instance": "query", "worker": "query"} {
		if vars[name] != kind {
			t.Errorf("template variable %s is %q, want a %s variable", name, vars[name], kind)
		}
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	queries := dashboardQueries(t)
	for i, q := range queries {
		if q.datasource != "${DS_PROMETHEUS}" {
			t.Errorf("%s: datasource %q, want ${DS_PROMETHEUS} (the dashboard's data source variable)", q.where, q.datasource)
		}
		if q.panel && !strings.Contains(q.expr, `instance=~"$instance"`) {
			t.Errorf("%s: %q ignores the instance variable", q.where, q.expr)
		}
		quoted, _ := json.Marshal(grafanaToPromQL(q.expr)) // a JSON string is a YAML scalar
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, quoted)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promtool(t, "check", "rules", file); err != nil {
		t.Errorf("a dashboard query is not valid PromQL: %v\n%s\nqueries:\n%s", err, out, rules.String())
	}
}

// TestExampleScrapeConfig checks prometheus.yml as Prometheus would load it, with the rules at
// their installed path pointed at this checkout's copy.
func TestExampleScrapeConfig(t *testing.T) {
	t.Parallel()
	config, err := os.ReadFile(examplePath("prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{installedRules, "job_name: clusterapp", `"127.0.0.1:9180"`, "scrape_interval: 15s"} {
		if !strings.Contains(string(config), want) {
			t.Errorf("prometheus.yml lacks %q", want)
		}
	}
	dir := t.TempDir()
	local := strings.ReplaceAll(string(config), installedRules, examplePath("clusterapp-alerts.yml"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promtool(t, "check", "config", filepath.Join(dir, "prometheus.yml")); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}

// TestExamplesPackaged: nfpm.yaml ships every file of packaging/examples/ into the doc
// directory of both packages (a plain file in the .deb, %doc in the .rpm).
func TestExamplesPackaged(t *testing.T) {
	nfpm, err := os.ReadFile(filepath.Join(repoRoot, "packaging", "nfpm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(repoRoot, "packaging", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		for _, packager := range []string{"deb", "rpm"} {
			entry := fmt.Sprintf("  - src: packaging/examples/%s\n    dst: /usr/share/doc/clusterapp/examples/%s\n", e.Name(), e.Name())
			if packager == "rpm" {
				entry += "    type: doc\n"
			}
			entry += "    packager: " + packager + "\n"
			if !strings.Contains(string(nfpm), entry) {
				t.Errorf("nfpm.yaml does not ship %s in the .%s; want:\n%s", e.Name(), packager, entry)
			}
		}
	}
}
