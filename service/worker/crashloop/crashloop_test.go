package crashloop

import (
	"testing"
	"time"
)

func TestDelayDoublesUpToMax(t *testing.T) {
	for n, want := range map[int]time.Duration{
		0: 0, 1: 250 * time.Millisecond, 2: 500 * time.Millisecond, 3: time.Second,
		8: 30 * time.Second, 9: 30 * time.Second, 1000: 30 * time.Second,
	} {
		if got := Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestCounterCountsFailuresInARowUntilReset(t *testing.T) {
	dir := t.TempDir()
	c, other := New(dir, "1"), New(dir, "2")
	for want := 1; want <= 3; want++ {
		if n, err := c.Fail(); err != nil || n != want {
			t.Fatalf("failure %d: Fail() = %d, %v", want, n, err)
		}
	}
	if n, _ := other.Fail(); n != 1 {
		t.Fatalf("worker 2 shares worker 1's count: %d", n)
	}
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := c.Reset(); err != nil {
		t.Fatalf("a second reset: %v", err)
	}
	if n, _ := c.Fail(); n != 1 {
		t.Fatalf("after a reset the count is %d, want 1", n)
	}
}

func TestStartDelayNoneFirstThenDoublingCapped(t *testing.T) {
	for n, want := range map[int]time.Duration{
		0: 0, 1: 0, 2: 250 * time.Millisecond, 3: 500 * time.Millisecond, 4: time.Second,
		8: 16 * time.Second, 9: MaxStartWait, 1000: MaxStartWait,
	} {
		if got := StartDelay(n); got != want {
			t.Errorf("StartDelay(%d) = %v, want %v", n, got, want)
		}
	}
}

// The two counts of one worker are apart: configuration failures do not
// slow the starts down, nor the other way round.
func TestStartsAndConfigFailuresAreApart(t *testing.T) {
	dir := t.TempDir()
	starts, config := NewStarts(dir, "1"), New(dir, "1")
	for range 3 {
		_, _ = starts.Fail()
	}
	if n, err := config.Fail(); err != nil || n != 1 {
		t.Fatalf("configuration failures after 3 unclean starts: %d, %v, want 1", n, err)
	}
	if err := starts.Reset(); err != nil {
		t.Fatal(err)
	}
	if n, _ := starts.Fail(); n != 1 {
		t.Fatalf("unclean starts after a reset: %d, want 1", n)
	}
}
