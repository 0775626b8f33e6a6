package worker

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/server"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// An invalid setting the worker applies stops it; one systemd applies is
// ignored; the listen address stops only a worker that binds it itself.
func TestProblemsSplitByScope(t *testing.T) {
	_, err := config.LoadVars(map[string]string{
		"CLUSTERAPP_READ_TIMEOUT": "soon", // the worker's
		"CLUSTERAPP_BACKLOG":      "-1",   // systemd's, through the generator
		"CLUSTERAPP_LISTEN":       "nowhere",
	})
	keys := func(ps []config.Problem) string {
		var k []string
		for _, p := range ps {
			k = append(k, p.Key)
		}
		return strings.Join(k, " ")
	}
	for _, tc := range []struct {
		env              env
		refused, ignored string
	}{
		{env{socketActivated: true}, "CLUSTERAPP_READ_TIMEOUT", "CLUSTERAPP_LISTEN CLUSTERAPP_BACKLOG"},
		{env{}, "CLUSTERAPP_LISTEN CLUSTERAPP_READ_TIMEOUT", "CLUSTERAPP_BACKLOG"},
	} {
		refused, ignored, other := tc.env.problems(err)
		if other != nil || refused == nil {
			t.Fatalf("%+v: refused %v, other %v", tc.env, refused, other)
		}
		if got := keys(refused.Problems); got != tc.refused {
			t.Errorf("%+v: refused %q, want %q", tc.env, got, tc.refused)
		}
		if got := keys(ignored); got != tc.ignored {
			t.Errorf("%+v: ignored %q, want %q", tc.env, got, tc.ignored)
		}
	}
	plain := errors.New("not a configuration error")
	if _, _, other := (env{}).problems(plain); other != plain {
		t.Errorf("another error came back as %v", other)
	}
}

// /readyz's reason follows the server: starting until the first probe has
// passed (SetReady), nothing while ready, then draining with the reason the
// drain was given.
func TestNotReadyFollowsTheServer(t *testing.T) {
	l, _ := test.NewNullLogger()
	w := &worker{srv: server.New(server.Options{ReadHeaderTimeout: time.Second, ShutdownTimeout: time.Second, Log: logrus.NewEntry(l)}, http.NotFoundHandler())}
	if state, why := w.notReady(); state != "starting" || !strings.Contains(why, "first health probe") {
		t.Fatalf("before SetReady: %q %q, want starting, naming the first health probe", state, why)
	}
	w.srv.SetReady()
	if state, why := w.notReady(); state != "" || why != "" {
		t.Fatalf("ready: %q %q, want nothing", state, why)
	}
	reason := "request limit reached"
	w.drainReason.Store(&reason)
	if err := w.srv.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if state, why := w.notReady(); state != "draining" || !strings.Contains(why, "(request limit reached)") {
		t.Fatalf("drained: %q %q, want draining, naming the reason", state, why)
	}
}
