package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/bench"
)

// A build is the last commit to touch anything but the docs: a commit or
// an edit of docs/ or of a Markdown file leaves it as it was, an
// uncommitted change to code marks it dirty, and a commit of code names a
// new build. Outside a repository the build is unknown.
func TestDetectBuildIgnoresTheDocs(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git:", err)
	}
	ctx := context.Background()
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(path, content string) {
		t.Helper()
		full := filepath.Join(repo, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if got := detectBuild(ctx, repo); got != "" {
		t.Errorf("not a repository: build %q, want unknown", got)
	}
	git("init", "-q")
	write("service/worker/worker.go", "package worker\n")
	write("docs/benchmarks.md", "# Benchmarks\n")
	write("README.md", "# clusterapp\n")
	git("add", "-A")
	git("commit", "-q", "-m", "code and docs")
	code := git("log", "-1", "--format=%h")
	if got := detectBuild(ctx, repo); got != code {
		t.Fatalf("build %q, want the commit %q", got, code)
	}

	write("docs/benchmarks.md", "# Benchmarks\n\nA new page.\n")
	write("service/worker/NOTES.md", "notes\n")
	if got := detectBuild(ctx, repo); got != code {
		t.Errorf("docs edited: build %q, want %q unchanged", got, code)
	}
	git("add", "-A")
	git("commit", "-q", "-m", "docs")
	if got := detectBuild(ctx, repo); got != code {
		t.Errorf("docs committed: build %q, want %q unchanged", got, code)
	}

	write("service/worker/scratch.go", "package worker\n")
	if got := detectBuild(ctx, repo); got != code+"-dirty" {
		t.Errorf("an uncommitted file of code: build %q, want %q", got, code+"-dirty")
	}
	git("add", "-A")
	git("commit", "-q", "-m", "code")
	if got, head := detectBuild(ctx, repo), git("log", "-1", "--format=%h"); got != head || got == code {
		t.Errorf("code committed: build %q, want the new commit %q", got, head)
	}
}

// Earlier runs that cannot be read do not cost the run: the page judges it
// alone and says why, and the log names the file.
func TestUnreadableEarlierRunsLeaveTheRunAlone(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "20261205T090000Z.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := &bench.Results{Build: "abc1234", Date: time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)}
	var log strings.Builder
	runs := earlierRuns(res, "bin/bench-runs", dir, &log)
	if runs.Unread == "" || len(runs.Earlier) != 0 || !strings.Contains(log.String(), bad) {
		t.Fatalf("runs %+v, log %q: want unread, naming %s", runs, log.String(), bad)
	}
	var page strings.Builder
	bench.WriteTargetsOverRuns(&page, res, runs)
	if !strings.Contains(page.String(), "could not be read") || !strings.Contains(page.String(), "judged alone") {
		t.Errorf("page: %q", page.String())
	}
}

// -start-ab takes trees and units as comma-separated lists and refuses an
// empty tree, a unit name the shell would split or expand, and no rounds,
// each with the flag named.
func TestStartABFlags(t *testing.T) {
	f, err := parseFlags([]string{"-start-ab", "/a,/b", "-start-ab-rounds", "4", "-start-ab-units", "clusterapp.socket"}, io.Discard)
	if err != nil || strings.Join(f.startAB, " ") != "/a /b" || f.startABRounds != 4 || strings.Join(f.startABUnits, " ") != "clusterapp.socket" {
		t.Fatalf("flags %+v, %v: want trees /a and /b, 4 rounds, clusterapp.socket", f, err)
	}
	if f, err = parseFlags(nil, io.Discard); err != nil || f.startAB != nil || f.startABRounds != 10 || f.startABUnits != nil {
		t.Fatalf("defaults %+v, %v: want no comparison, 10 rounds, the run's units", f, err)
	}
	for args, flag := range map[string]string{
		"-start-ab /a,,/b":            "-start-ab",
		"-start-ab-rounds 0":          "-start-ab-rounds",
		"-start-ab-units a.socket,b*": "-start-ab-units",
	} {
		_, err := parseFlags(strings.Fields(args), io.Discard)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: %v, want a usage error naming %s", args, err, flag)
		}
	}
}
