package bench

import (
	"slices"
	"time"
)

// File workloads (tree, install) run in rounds. Under TCG a single sample
// of a sub-second phase moved by up to ±50% between two runs of the same
// section: the first target measured paid for translating the helper's
// code, ext4's journal commits fell in one phase or another, and the host
// is shared. So every target runs the workload several times, the targets
// taking turns, and a phase's row is its median.
const fileRounds = 3

// fileRoundBudget returns how long a target's rounds may take before it
// gets no more: a slow share (9p creates 2,000 files in 30 s here) is far
// from native whatever the noise, and it is the fast targets whose ratios
// noise can flip.
func fileRoundBudget(quick bool) time.Duration {
	if quick {
		return 20 * time.Second
	}
	return 3 * time.Minute
}

// roundResult is one round of a workload on one target.
type roundResult struct {
	times   []float64 // seconds per phase
	catchUp []Result  // a sync mount's catch-up rows, one per phase
}

// interleaved runs up to rounds rounds of run on each of n targets, every
// target once per round in order. A target that failed, or whose rounds
// took budget, is left out of the later rounds. It returns each target's
// rounds and its first error.
func interleaved(n, rounds int, budget time.Duration, run func(target int) (roundResult, error)) ([][]roundResult, []error) {
	results := make([][]roundResult, n)
	errs := make([]error, n)
	spent := make([]time.Duration, n)
	for round := range rounds {
		for i := range n {
			if errs[i] != nil || (round > 0 && spent[i] >= budget) {
				continue
			}
			start := time.Now()
			res, err := run(i)
			spent[i] += time.Since(start)
			if err != nil {
				errs[i] = err
				continue
			}
			results[i] = append(results[i], res)
		}
	}
	return results, errs
}

// medianRound folds a target's rounds into one: the median of each phase's
// times and of each catch-up row's value. Every finished round of a
// workload has the same phases, so the rounds line up.
func medianRound(rounds []roundResult) roundResult {
	if len(rounds) == 0 {
		return roundResult{}
	}
	out := roundResult{times: make([]float64, len(rounds[0].times)), catchUp: slices.Clone(rounds[0].catchUp)}
	vs := make([]float64, len(rounds))
	for p := range out.times {
		for i, r := range rounds {
			vs[i] = r.times[p]
		}
		out.times[p] = median(vs)
	}
	for c := range out.catchUp {
		for i, r := range rounds {
			vs[i] = r.catchUp[c].Value
		}
		out.catchUp[c].Value = median(vs)
	}
	return out
}

// median of vs (the mean of the middle two for an even count); 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 0 {
		return (s[m-1] + s[m]) / 2
	}
	return s[m]
}
