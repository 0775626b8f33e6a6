package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/worker"
	"github.com/clusterapp/clusterapp/service/worker/metrics"
	"github.com/sirupsen/logrus"
)

// greet is a service of one route: GET /greet?name=X.
func greet(worker.Tools) []worker.Route {
	return []worker.Route{{Path: "/greet", Handler: func(w http.ResponseWriter, r *http.Request) {
		worker.JSON(w, http.StatusOK, map[string]string{"greeting": "hello, " + r.URL.Query().Get("name")})
	}}}
}

// A service is its routes. Served through the handler stack a client
// reaches (without a server, as a test of the routes would), a request gets
// the worker's X-Worker header and its JSON errors.
func Example() {
	logger := logrus.New()
	logger.Out = io.Discard
	log := logrus.NewEntry(logger)
	m := metrics.New(metrics.Options{Worker: "1", Routes: worker.Labels(greet), Start: time.Now(), Log: log})
	stack := worker.NewStack(worker.StackOptions{Name: "1", Routes: greet(worker.Tools{}), Metrics: m, Log: log})

	for _, target := range []string{"/greet?name=Ada", "/nope"} {
		rec := httptest.NewRecorder()
		stack.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		fmt.Println(rec.Code, rec.Header().Get("X-Worker"), strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// 200 1 {"greeting":"hello, Ada"}
	// 404 1 {"error":"no route for /nope","routes":["/greet","/healthz","/readyz"],"status":404}
}

// A program runs its service as a worker of the shipped units: Run serves
// until SIGTERM and drains; an invalid CLUSTERAPP_* setting is a
// *ConfigError, which the units expect as exit status 78 (EX_CONFIG).
// cmd/clusterapp-hello is a whole program.
func Example_run() {
	err := worker.Run(context.Background(), worker.Options{
		Name:    "1", // the unit's --instance %i
		Version: "1.0.0",
		Routes:  greet,
		Stderr:  os.Stderr,
	})
	if ce := (*worker.ConfigError)(nil); errors.As(err, &ce) {
		os.Exit(78)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
