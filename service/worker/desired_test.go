package worker

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The size is the files' now: the scale file's value wins, and what the
// generator would not take means its default, one per CPU.
func TestConfiguredPoolSize(t *testing.T) {
	for _, tc := range []struct {
		env, scale string // "" for no file
		want       int
		ok         bool
	}{
		{"", "", 0, false},
		{"CLUSTERAPP_WORKERS=4\n", "", 4, true},
		{"CLUSTERAPP_WORKERS=4\n", "CLUSTERAPP_WORKERS=1\n", 1, true}, // clusterapp scale 1
		{"# nothing\n", "", runtime.NumCPU(), true},
		{"CLUSTERAPP_WORKERS=0\n", "", runtime.NumCPU(), true},
		{"CLUSTERAPP_WORKERS=010\n", "", runtime.NumCPU(), true}, // refused by the generator: its default
		{"CLUSTERAPP_WORKERS=+2\n", "", 2, true},
		{"", "CLUSTERAPP_WORKERS=3\n", 3, true},
		{"CLUSTERAPP_WORKERS=2\x00\n", "", 0, false}, // a file systemd refuses: the start's size stands
	} {
		dir := t.TempDir()
		env := filepath.Join(dir, "clusterapp.env")
		for path, content := range map[string]string{env: tc.env, filepath.Join(dir, "scale.env"): tc.scale} {
			if content == "" {
				continue
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if n, ok := configuredPoolSize(env); n != tc.want || ok != tc.ok {
			t.Errorf("env %q, scale %q: %d, %v; want %d, %v", tc.env, tc.scale, n, ok, tc.want, tc.ok)
		}
		// The exporter has no size of its own: with no file, the default.
		want, wantOK := tc.want, tc.ok
		if tc.env == "" && tc.scale == "" {
			want, wantOK = runtime.NumCPU(), true
		}
		if n, ok := exporterPoolSize(env); n != want || ok != wantOK {
			t.Errorf("exporter: env %q, scale %q: %d, %v; want %d, %v", tc.env, tc.scale, n, ok, want, wantOK)
		}
	}
}
