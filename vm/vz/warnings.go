package vz

import "log/slog"

// logPlanWarnings puts the plan's warnings in the host agent's log, one
// line each, as a machine starts or resumes (not in Prepare, which plans
// without starting anything).
func logPlanWarnings(name string, p *VMPlan) {
	for _, w := range p.Warnings {
		slog.Warn(w, "name", name)
	}
}
