// Package workload is the seed service's computations, with nothing else:
// the worker's routes (package app) and the bare net/http anchor
// (cmd/clusterapp-bare) run the same code, and the anchor links none of the
// worker runtime.
package workload

import "math/rand/v2"

// SlowCount is the size of the /slow workload: 100,000 random numbers.
const SlowCount = 100_000

// Fib computes the nth Fibonacci number by naive recursion, on purpose: it is
// the CPU-bound workload of the articles, and must cost the same every time.
func Fib(n int) uint64 {
	if n < 2 {
		return uint64(n)
	}
	return Fib(n-1) + Fib(n-2)
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
