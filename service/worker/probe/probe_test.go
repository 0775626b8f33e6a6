package probe

import (
	"context"
	"net/http"
	"testing"
)

func TestMark(t *testing.T) {
	ctx := context.Background()
	if Marked(ctx) {
		t.Fatal("a plain context is marked")
	}
	if !Marked(Mark(ctx)) {
		t.Fatal("a marked context is not")
	}
	type other struct{}
	if !Marked(context.WithValue(Mark(ctx), other{}, 1)) {
		t.Fatal("the mark is lost under a child context")
	}
}

// The probe's request is the one from no connection with the mark: a
// client's request, which has an address, is never taken for it, mark or
// not, nor is an unmarked request from no connection.
func TestIs(t *testing.T) {
	probe, _ := http.NewRequestWithContext(Mark(context.Background()), http.MethodGet, Path, nil)
	if !Is(probe) {
		t.Fatal("the marked request from no connection is not the probe")
	}
	client := probe.Clone(probe.Context())
	client.RemoteAddr = "192.0.2.1:40000"
	if Is(client) {
		t.Fatal("a marked request with a client's address is taken for the probe")
	}
	plain, _ := http.NewRequest(http.MethodGet, Path, nil)
	if Is(plain) {
		t.Fatal("an unmarked request is taken for the probe")
	}
}
