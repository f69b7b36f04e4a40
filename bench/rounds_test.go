package bench

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestInterleavedTakesTurnsAndDropsSlowAndFailedTargets(t *testing.T) {
	var calls []string
	perTarget := map[int]int{}
	rounds, errs := interleaved(3, 3, 10*time.Millisecond, func(i int) (roundResult, error) {
		perTarget[i]++
		calls = append(calls, fmt.Sprint(i))
		switch {
		case i == 1:
			time.Sleep(15 * time.Millisecond) // over the budget after one round
		case i == 2 && perTarget[i] == 2:
			return roundResult{}, errors.New("disk full")
		}
		return roundResult{times: []float64{float64(perTarget[i])}}, nil
	})
	if got, want := strings.Join(calls, ","), "0,1,2,0,2,0"; got != want {
		t.Errorf("calls %s, want %s (turns; 1 over budget after one round; 2 stopped by its error)", got, want)
	}
	if len(rounds[0]) != 3 || len(rounds[1]) != 1 || len(rounds[2]) != 1 {
		t.Errorf("rounds per target %d %d %d, want 3 1 1", len(rounds[0]), len(rounds[1]), len(rounds[2]))
	}
	if errs[0] != nil || errs[1] != nil || errs[2] == nil {
		t.Errorf("errors %v", errs)
	}
}

func TestMedianRound(t *testing.T) {
	rs := []roundResult{
		{times: []float64{3, 10}, catchUp: []Result{{Metric: "catch-up create", Value: 5}}},
		{times: []float64{1, 30}, catchUp: []Result{{Metric: "catch-up create", Value: 1}}},
		{times: []float64{2, 20}, catchUp: []Result{{Metric: "catch-up create", Value: 9}}},
	}
	m := medianRound(rs)
	if m.times[0] != 2 || m.times[1] != 20 || m.catchUp[0].Value != 5 || m.catchUp[0].Metric != "catch-up create" {
		t.Errorf("median round %+v", m)
	}
	if rs[0].catchUp[0].Value != 5 {
		t.Error("the first round's rows were changed")
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of an even count %v, want 2.5", got)
	}
	if got := medianRound(nil); got.times != nil {
		t.Errorf("no rounds gave %+v", got)
	}
}

func TestMediansSkipATargetWithoutAFinishedRound(t *testing.T) {
	r := &runner{rep: &Report{}}
	targets := []target{{name: "native (data disk)"}, {name: "9p share"}, {name: "sync mount"}}
	rounds := [][]roundResult{
		{{times: []float64{1}}, {times: []float64{3}}},
		nil,
		{{times: []float64{2}}},
	}
	errs := []error{nil, errors.New("no space"), errors.New("round 2 failed")}
	got := r.medians("tree", targets, rounds, errs)
	if len(got) != 2 || got[0].target.name != "native (data disk)" || got[0].times[0] != 2 || got[0].note != "median of 2 rounds" ||
		got[1].target.name != "sync mount" || got[1].note != "1 round" {
		t.Errorf("medians %+v", got)
	}
	if want := "tree 9p share: no space,tree sync mount: round 2 failed"; strings.Join(r.rep.Skipped, ",") != want {
		t.Errorf("skipped %q, want %q", r.rep.Skipped, want)
	}
}
