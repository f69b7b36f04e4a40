package main

import (
	"fmt"
	"regexp"
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
