package packaging_test

// Readers of the files in packaging/examples/ for examples_test.go: the rules file's layout, the
// rule tests' coverage, PromQL series names and the Grafana dashboard's queries.

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// rule is one rule of clusterapp-alerts.yml, as far as these tests need it.
type rule struct {
	kind, name, expr              string // kind: "record" or "alert"
	forDuration, severity         string
	summary, description, runbook string
}

// readRules reads clusterapp-alerts.yml's rules in file order. It is no general YAML parser
// (go.mod has none this package may import): it knows the file's layout, rules as
// "- record:"/"- alert:" items whose keys are plain or block scalars ("|", ">-"), and
// TestExampleRulesPromtool checks that it finds as many rules as promtool does.
func readRules(t *testing.T) []rule {
	t.Helper()
	text, err := os.ReadFile(examplePath("clusterapp-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	start := regexp.MustCompile(`^\s*- (record|alert): (\S+)$`)
	keyValue := regexp.MustCompile(`^(\s*)(\w+): ?(.*)$`)
	var rules []rule
	lines := strings.Split(string(text), "\n")
	for i := 0; i < len(lines); i++ {
		if m := start.FindStringSubmatch(lines[i]); m != nil {
			rules = append(rules, rule{kind: m[1], name: m[2]})
			continue
		}
		m := keyValue.FindStringSubmatch(lines[i])
		if m == nil || len(rules) == 0 || strings.HasPrefix(strings.TrimSpace(lines[i]), "#") {
			continue
		}
		value := m[3]
		if value == "|" || value == ">-" {
			// A block scalar: every following line indented deeper than its key.
			var block []string
			for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || indent(lines[i+1]) > len(m[1])) {
				i++
				block = append(block, strings.TrimSpace(lines[i]))
			}
			value = strings.TrimSpace(strings.Join(block, "\n"))
		}
		r := &rules[len(rules)-1]
		switch m[2] {
		case "expr":
			r.expr = value
		case "for":
			r.forDuration = value
		case "severity":
			r.severity = value
		case "summary":
			r.summary = value
		case "description":
			r.description = value
		case "runbook":
			r.runbook = value
		}
	}
	return rules
}

func indent(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

// alertCoverage says whether clusterapp-alerts_test.yml expects an alert to fire somewhere and
// to stay quiet somewhere.
type alertCoverage struct{ fires, quiet bool }

func alertTests(t *testing.T) map[string]alertCoverage {
	t.Helper()
	text, err := os.ReadFile(examplePath("clusterapp-alerts_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	coverage := map[string]alertCoverage{}
	alert := ""
	for _, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "alertname: "); ok {
			alert = name
		} else if expected, ok := strings.CutPrefix(line, "exp_alerts:"); ok && alert != "" {
			c := coverage[alert]
			if strings.TrimSpace(expected) == "[]" {
				c.quiet = true
			} else {
				c.fires = true
			}
			coverage[alert] = c
		}
	}
	return coverage
}

// parseDuration reads a Prometheus duration of one unit ("0m", "90s", "2h") in seconds.
func parseDuration(s string) (int, error) {
	units := map[byte]int{'s': 1, 'm': 60, 'h': 3600, 'd': 86400}
	if len(s) < 2 || units[s[len(s)-1]] == 0 {
		return 0, fmt.Errorf("%q is not a duration such as 1m", s)
	}
	n, err := strconv.Atoi(s[:len(s)-1])
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 1m", s)
	}
	return n * units[s[len(s)-1]], nil
}

var (
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlToken    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*|[0-9][0-9a-zA-Z_.]*`)
	promqlKeywords = []string{"and", "or", "unless", "offset", "bool", "by", "without", "on", "ignoring",
		"group_left", "group_right", "inf", "nan", "atan2"}
)

// seriesNames returns the metric names an expression selects, in order, without repeats: its
// identifiers once strings, label matchers, ranges and grouping labels are removed, other than
// keywords, numbers and function names (an identifier followed by "(").
func seriesNames(expr string) []string {
	expr = promqlStrings.ReplaceAllString(expr, `""`)
	expr = promqlMatchers.ReplaceAllString(expr, " ")
	expr = promqlGrouping.ReplaceAllString(expr, " ")
	var names []string
	for _, loc := range promqlToken.FindAllStringIndex(expr, -1) {
		token := expr[loc[0]:loc[1]]
		isCall := strings.HasPrefix(strings.TrimLeft(expr[loc[1]:], " \t\n"), "(")
		if token[0] >= '0' && token[0] <= '9' || isCall || slices.Contains(promqlKeywords, strings.ToLower(token)) {
			continue
		}
		if !slices.Contains(names, token) {
			names = append(names, token)
		}
	}
	return names
}

func containsAll(set, subset []string) bool {
	for _, s := range subset {
		if !slices.Contains(set, s) {
			return false
		}
	}
	return true
}

// grafanaToPromQL replaces Grafana's variables with values Prometheus accepts: an interval for
// $__rate_interval and the like, a match-all regular expression for $instance and $worker.
func grafanaToPromQL(expr string) string {
	return regexp.MustCompile(`\$\{?(\w+)(?::\w+)?\}?`).ReplaceAllStringFunc(expr, func(v string) string {
		if strings.HasPrefix(strings.Trim(v, "${}"), "__") {
			return "5m"
		}
		return ".*"
	})
}

type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	Title      string             `json:"title"`
	Type       string             `json:"type"`
	Datasource *grafanaDatasource `json:"datasource"`
	Targets    []struct {
		RefID      string             `json:"refId"`
		Expr       string             `json:"expr"`
		Datasource *grafanaDatasource `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's panels
}

type grafanaDashboard struct {
	SchemaVersion int `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string             `json:"name"`
			Type       string             `json:"type"`
			Definition string             `json:"definition"`
			Datasource *grafanaDatasource `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

func readDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	text, err := os.ReadFile(examplePath("grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(text, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	return d
}

// dashboardQuery is one PromQL expression of the dashboard: a panel target, or the series
// selector of a template variable's label_values().
type dashboardQuery struct {
	where, expr string
	datasource  string // the UID of the panel's (or variable's) data source, and the target's
	panel       bool
}

func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	d := readDashboard(t)
	uid := func(ds *grafanaDatasource) string {
		if ds == nil {
			return "(none)"
		}
		return ds.UID
	}
	var queries []dashboardQuery
	var walk func([]grafanaPanel)
	walk = func(panels []grafanaPanel) {
		for _, p := range panels {
			walk(p.Panels)
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, target := range p.Targets {
				ds := uid(p.Datasource)
				if target.Datasource != nil && target.Datasource.UID != ds {
					ds = target.Datasource.UID
				}
				queries = append(queries, dashboardQuery{
					where: fmt.Sprintf("panel %q target %s", p.Title, target.RefID), expr: target.Expr, datasource: ds, panel: true})
			}
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("template variable %s: %q is not label_values(selector, label)", v.Name, v.Definition)
			continue
		}
		queries = append(queries, dashboardQuery{where: "variable " + v.Name, expr: m[1], datasource: uid(v.Datasource)})
	}
	return queries
}
