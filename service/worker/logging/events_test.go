package logging

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

var events = map[string]string{
	"ready": MsgReady, "draining": MsgDraining, "drained": MsgDrained, "recycled": MsgRecycled, "recycled for memory": MsgRecycledMemory,
	"watchdog probe failed": MsgWatchdogProbeFailed, "invalid configuration": MsgInvalidConfig, "back-off": MsgBackOff,
	"restart back-off": MsgRestartBackOff, "unreached back-off": MsgUnreachedBackOff,
}

// Every MESSAGE_ID= is an id128 as journalctl prints it, and no two events
// share one.
func TestMessageIDs(t *testing.T) {
	seen := map[string]string{}
	for name, id := range events {
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
			t.Errorf("%s: MESSAGE_ID %q is not 32 lowercase hex digits", name, id)
		}
		if other, ok := seen[id]; ok {
			t.Errorf("%s and %s share MESSAGE_ID %s", name, other, id)
		}
		seen[id] = name
	}
}

// The shipped catalog explains every event and nothing else.
func TestCatalogMatchesMessageIDs(t *testing.T) {
	b, err := os.ReadFile("../../../systemd/clusterapp.catalog")
	if err != nil {
		t.Fatal(err)
	}
	var inCatalog []string
	for _, m := range regexp.MustCompile(`(?m)^-- ([0-9a-f]{32})$`).FindAllStringSubmatch(string(b), -1) {
		inCatalog = append(inCatalog, m[1])
	}
	var ids []string
	for _, id := range events {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	slices.Sort(inCatalog)
	if !slices.Equal(ids, inCatalog) {
		t.Fatalf("catalog ids %v, want %v", inCatalog, ids)
	}
}
