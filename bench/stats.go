package bench

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0..100) of samples by the
// nearest-rank method: always one of the samples, so a p99 of 50 samples
// is the worst one rather than an interpolation nobody observed. It is 0
// for no samples.
func Percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	p = math.Max(0, math.Min(100, p))
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	if rank < 1 {
		rank = 1
	}
	return s[rank-1]
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// micros turns the helper's microsecond samples into durations.
func micros(us []int64) []time.Duration {
	out := make([]time.Duration, len(us))
	for i, u := range us {
		out[i] = time.Duration(u) * time.Microsecond
	}
	return out
}
