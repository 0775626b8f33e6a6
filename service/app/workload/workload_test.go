package workload

import "testing"

func TestFib(t *testing.T) {
	for n, want := range map[int]uint64{0: 0, 1: 1, 2: 1, 10: 55, 25: 75025, 30: 832040} {
		if got := Fib(n); got != want {
			t.Errorf("Fib(%d) = %d, want %d", n, got, want)
		}
	}
}

// The mean of x² for x uniform in [0,1) is 1/3: the sum of 100,000 lies
// within a few hundred of 33,333.
func TestSumOfSquares(t *testing.T) {
	if got := SumOfSquares(SlowCount); got < 32_000 || got > 34_700 {
		t.Fatalf("SumOfSquares(%d) = %v, want about %d", SlowCount, got, SlowCount/3)
	}
}
