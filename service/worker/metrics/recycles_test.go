package metrics

import "testing"

// A worker's recycles are counted by reason, and survive its restart in
// the shared table, as its exits do: a worker recycled for memory again and
// again (a leak) shows as such, not as clean exits among the rest.
func TestRecyclesByReason(t *testing.T) {
	dir := t.TempDir()
	w1, _ := newWorker(t, dir, "1")
	for _, r := range []string{"memory", "memory", "requests", "something-new"} {
		w1.Recycled(r)
	}
	w1.Close()
	again, _ := newWorker(t, dir, "1") // the fresh process systemd started
	defer again.Close()
	for reason, want := range map[string]float64{"memory": 2, "requests": 1, "tables": 0} {
		if got := value(t, again, "clusterapp_worker_recycles_total", `reason="`+reason+`",worker="1"`); got != want {
			t.Errorf("recycles{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}
