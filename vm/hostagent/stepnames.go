package hostagent

// StepNames lists the boot steps a start runs for runtime ("docker" or
// "containerd"), in their order: the names `vmdock start` prints and the
// events carry. It reads them off bootSteps itself, so the architecture
// page's test follows the code rather than a copy of the list.
func StepNames(runtime string) []string {
	ha := &hostAgent{}
	ha.cfg.Runtime = runtime
	steps := ha.bootSteps()
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.name
	}
	return names
}
