package probe

import (
	"context"
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
