package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/vmdock/vmdock/vm/hostagent"
)

// bootStepsMarker names the markers around the host agent's numbered steps
// in the architecture page.
const bootStepsMarker = "host-agent-steps"

var (
	numberedItem = regexp.MustCompile(`(?m)^\d+\. (.*)$`)
	boldName     = regexp.MustCompile(`\*\*([a-z0-9-]+)\*\*`)
)

// checkBootSteps compares the numbered list in page with the steps the
// host agent runs: item i starts with step i's bold name for the docker
// runtime and, where the containerd runtime's step is named otherwise,
// names that one in bold too.
func checkBootSteps(page string) []string {
	list, err := between(page, bootStepsMarker)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v: put the markers around the host agent's numbered boot steps", ArchitecturePage, err)}
	}
	docker, containerd := hostagent.StepNames("docker"), hostagent.StepNames("containerd")
	var documented [][]string
	for _, m := range numberedItem.FindAllStringSubmatch(list, -1) {
		var names []string
		for _, b := range boldName.FindAllStringSubmatch(m[1], -1) {
			names = append(names, b[1])
		}
		documented = append(documented, names)
	}
	fix := fmt.Sprintf("make %s's numbered list between the %s markers name vm/hostagent's bootSteps (boot.go) in their order, one item each, each starting with the step's name in bold", ArchitecturePage, bootStepsMarker)
	var firsts []string
	for _, names := range documented {
		if len(names) == 0 {
			firsts = append(firsts, "(no bold name)")
			continue
		}
		firsts = append(firsts, names[0])
	}
	if len(documented) != len(docker) {
		return []string{fmt.Sprintf("%s lists %d boot steps (%s), the host agent runs %d (%s): %s",
			ArchitecturePage, len(documented), strings.Join(firsts, ", "), len(docker), strings.Join(docker, ", "), fix)}
	}
	var problems []string
	for i, names := range documented {
		if firsts[i] != docker[i] {
			problems = append(problems, fmt.Sprintf("%s: boot step %d is %q, the host agent's is %q: %s", ArchitecturePage, i+1, firsts[i], docker[i], fix))
			continue
		}
		if containerd[i] != docker[i] && !contains(names, containerd[i]) {
			problems = append(problems, fmt.Sprintf("%s: boot step %d (%s) does not name the containerd runtime's %q in bold: %s", ArchitecturePage, i+1, docker[i], containerd[i], fix))
		}
	}
	return problems
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// firstRunLine is a step's first line in `vmdock start`'s output.
var firstRunLine = regexp.MustCompile(`(?m)^\s*\[(\d+)\] ([a-z0-9-]+) \.\.\.$`)

// checkFirstRun holds the sample `vmdock start` output on page (README.md)
// to the host agent's steps: each "[n] name ..." line shown names step n,
// and the last one shown is the last step.
func checkFirstRun(page, name string) []string {
	steps := hostagent.StepNames("docker")
	lines := firstRunLine.FindAllStringSubmatch(page, -1)
	if len(lines) == 0 {
		return []string{fmt.Sprintf("%s shows no `vmdock start` output (lines like \"[1] %s ...\")", name, steps[0])}
	}
	fix := fmt.Sprintf("make the sample `vmdock start` output in %s follow vm/hostagent's bootSteps (%s)", name, strings.Join(steps, ", "))
	var problems []string
	for _, l := range lines {
		n, _ := strconv.Atoi(l[1])
		if n < 1 || n > len(steps) || steps[n-1] != l[2] {
			problems = append(problems, fmt.Sprintf("%s: %q: %s", name, strings.TrimSpace(l[0]), fix))
		}
	}
	if last := lines[len(lines)-1]; last[1] != strconv.Itoa(len(steps)) {
		problems = append(problems, fmt.Sprintf("%s: the sample ends at step %s, the host agent runs %d: %s", name, last[1], len(steps), fix))
	}
	return problems
}
