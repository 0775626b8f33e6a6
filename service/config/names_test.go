package config

import "testing"

func TestWorkerUnitNames(t *testing.T) {
	if got := WorkerUnit(3); got != "clusterapp-worker@3.service" {
		t.Errorf("WorkerUnit(3) = %q", got)
	}
	if n, ok := WorkerNumber("clusterapp-worker@12.service"); !ok || n != 12 {
		t.Errorf("WorkerNumber = %d %v", n, ok)
	}
	for _, bad := range []string{"clusterapp.socket", "clusterapp-worker@x.service", "other@1.service", WorkerTemplate} {
		if _, ok := WorkerNumber(bad); ok {
			t.Errorf("WorkerNumber(%q) accepted", bad)
		}
	}
	if !IsWorkerUnit("clusterapp-worker@host2.service") || IsWorkerUnit(WorkerTemplate) || IsWorkerUnit(SocketUnit) {
		t.Error("IsWorkerUnit")
	}
	if got := ScaleFileFor("/tmp/x/clusterapp.env"); got != "/tmp/x/scale.env" {
		t.Errorf("ScaleFileFor = %q", got)
	}
}
