package bench

// StepTime is one host agent boot step.
type StepTime struct {
	Step    string
	Seconds float64
}

// Boot is what the host agent reports about the instance's latest boot
// (its control API's boot report): the runner's boot section prints it.
type Boot struct {
	Steps []StepTime
	// HelloUptime is the guest's uptime (s) when its agent first answered:
	// kernel plus init time.
	HelloUptime float64
}
