package app

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
)

// defaultFibN is the n the articles use: fibonacci(40) costs about a second
// of CPU in Node.js and a few hundred milliseconds in Go.
const defaultFibN = 40

// slowCount is the size of the /slow workload: 100,000 random numbers.
const slowCount = 100_000

// Fib computes the nth Fibonacci number by naive recursion, on purpose: it is
// the CPU-bound workload of the articles, and must cost the same every time.
func Fib(n int) uint64 {
	if n < 2 {
		return uint64(n)
	}
	return Fib(n-1) + Fib(n-2)
}

func (a *App) index(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("Hello World!\n")) // a write error means the client left
}

func (a *App) fib(w http.ResponseWriter, r *http.Request) {
	n := defaultFibN
	if raw, ok := r.URL.Query()["n"]; ok {
		v, err := strconv.Atoi(raw[len(raw)-1])
		if err != nil || v < 0 || v > a.opts.FibMaxN {
			writeError(w, http.StatusBadRequest,
				fmt.Sprintf("parameter n must be an integer from 0 to %d, got %q", a.opts.FibMaxN, raw[len(raw)-1]),
				map[string]any{"parameter": "n", "min": 0, "max": a.opts.FibMaxN})
			return
		}
		n = v
	}
	writeJSON(w, http.StatusOK, map[string]any{"n": n, "fib": Fib(n)})
}

// SumOfSquares fills count random float64s in [0,1) and returns the sum of
// their squares: the articles' /slow route, an allocation plus a loop.
func SumOfSquares(count int) float64 {
	nums := make([]float64, count)
	for i := range nums {
		nums[i] = rand.Float64()
	}
	var sum float64
	for _, x := range nums {
		sum += x * x
	}
	return sum
}

func (a *App) slow(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"count": slowCount, "sum_of_squares": SumOfSquares(slowCount)})
}
