package packaging_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/config"
)

// sysctlFile returns the key = value settings of sysctl/60-clusterapp.conf, in file order.
func sysctlFile(t *testing.T) (keys []string, values map[string]string) {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "sysctl", "60-clusterapp.conf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	values = map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("not key = value: %q", line)
		}
		k, v = strings.TrimSpace(k), strings.Join(strings.Fields(v), " ")
		keys = append(keys, k)
		values[k] = v
	}
	return keys, values
}

func unitSetting(t *testing.T, path, key string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + key + `=(\d+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s sets no %s=", path, key)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// The shipped sysctl file sets every knob the issue names, consistently with the units.
func TestSysctlFile(t *testing.T) {
	keys, v := sysctlFile(t)
	for _, k := range []string{"net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog", "net.core.netdev_max_backlog",
		"net.ipv4.ip_local_port_range", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_tw_reuse", "fs.file-max", "fs.nr_open"} {
		if _, ok := v[k]; !ok {
			t.Errorf("%s is not set", k)
		}
	}
	if _, ok := v["net.ipv4.tcp_tw_recycle"]; ok {
		t.Error("net.ipv4.tcp_tw_recycle was removed in Linux 4.12; setting it only logs an error")
	}
	if len(keys) != len(v) {
		t.Errorf("a key is set twice: %v", keys)
	}
	atoi := func(k string) int { n, _ := strconv.Atoi(v[k]); return n }
	if backlog := unitSetting(t, "systemd/"+config.SocketUnit, "Backlog"); atoi("net.core.somaxconn") < backlog {
		t.Errorf("net.core.somaxconn %s is below the socket's Backlog=%d: the kernel would clamp it", v["net.core.somaxconn"], backlog)
	}
	limit := unitSetting(t, "packaging/files/"+config.WorkerTemplate+".d/10-limits.conf", "LimitNOFILE")
	if atoi("fs.nr_open") < limit {
		t.Errorf("fs.nr_open %s is below the workers' LimitNOFILE=%d", v["fs.nr_open"], limit)
	}
	// The shipped sockets' ports are reserved from the source-port range.
	reserved := "," + v["net.ipv4.ip_local_reserved_ports"] + ","
	for _, unit := range []string{"systemd/" + config.SocketUnit, "systemd/" + config.MetricsSocketUnit} {
		data, err := os.ReadFile(filepath.Join(repoRoot, unit))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^ListenStream=.*:(\d+)$`).FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s: no ListenStream=ADDRESS:PORT", unit)
		}
		if !strings.Contains(reserved, ","+string(m[1])+",") {
			t.Errorf("%s's port %s is not in net.ipv4.ip_local_reserved_ports = %s", unit, m[1], v["net.ipv4.ip_local_reserved_ports"])
		}
	}
	lo, _ := strconv.Atoi(strings.Fields(v["net.ipv4.ip_local_port_range"])[0])
	if lo <= 8080 {
		t.Errorf("ip_local_port_range starts at %d: the listening port 8080 could be taken as a source port", lo)
	}
}
