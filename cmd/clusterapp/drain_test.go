package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/loadgen"
)

// TestSIGTERMLosesNoRequest stops one of two workers sharing a socket, as
// `systemctl restart clusterapp-worker@1` does, under keep-alive load:
// STOPPING=1 is sent, the draining worker finishes what it has, the other
// worker takes the new connections, no request fails, and the drained worker
// exits 0.
func TestSIGTERMLosesNoRequest(t *testing.T) {
	sock := newSharedSocket(t)
	n1, n2 := newNotifySocket(t), newNotifySocket(t)
	w1 := startWorker(t, &sock, n1, "--instance=1")
	n1.waitFor(t, "READY=1", 10*time.Second)

	type outcome struct {
		res *loadgen.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := loadgen.Run(context.Background(), loadgen.Options{
			URL: "http://" + sock.addr + "/fib?n=15", Concurrency: 32, KeepAlive: true, Duration: 3 * time.Second,
		})
		done <- outcome{res, err}
	}()
	// Worker 1 alone holds every keep-alive connection; worker 2 joins, and
	// then worker 1 drains: all its clients must move over without a failure.
	time.Sleep(500 * time.Millisecond)
	w2 := startWorker(t, &sock, n2, "--instance=2")
	n2.waitFor(t, "READY=1", 10*time.Second)
	w1.signal(t, syscall.SIGTERM)
	n1.waitFor(t, "STOPPING=1", 5*time.Second)
	if code := w1.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("drained worker exit %d, want 0", code)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	t.Logf("%d requests, %d ok, by worker %v, errors %v", o.res.Requests, o.res.OK, o.res.ByHeader, o.res.ErrorSamples)
	if o.res.Errors() != 0 || o.res.OK != o.res.Requests {
		t.Fatalf("%d of %d requests failed across the drain: %v", o.res.Errors(), o.res.Requests, o.res.ErrorSamples)
	}
	if o.res.ByHeader["1"] == 0 || o.res.ByHeader["2"] == 0 {
		t.Fatalf("both workers must have served: %v", o.res.ByHeader)
	}
	w2.signal(t, syscall.SIGTERM)
	if code := w2.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("second worker exit %d", code)
	}
}
