package maketest

import (
	"strings"
	"testing"
)

// TestE2ETargetsSkipTheirPrerequisitesWhenTold: .ci/run installs, builds
// and makes the images once, early, then runs each e2e target with
// E2E_PREREQS= : none may build, make an image or install again (two
// builds at once would truncate a binary a running test uses).
func TestE2ETargetsSkipTheirPrerequisitesWhenTold(t *testing.T) {
	dir := checkout(t)
	for _, target := range []string{"e2e-containerd", "e2e-resume", "e2e-sandbox", "e2e-arm64"} {
		plan, err := runMake(t, dir, "-n", target, "E2E_PREREQS=")
		if err != nil {
			t.Fatalf("make -n %s E2E_PREREQS=: %v\n%s", target, err, plan)
		}
		lines := strings.Split(strings.TrimSpace(plan), "\n")
		if len(lines) != 1 || !isE2ETest(lines[0]) {
			t.Errorf("make -n %s E2E_PREREQS= runs more than its test:\n%s", target, plan)
		}
	}
}

// TestE2EArm64MakesItsPrerequisites: run by hand, e2e-arm64 still
// installs qemu-system-aarch64, builds and makes the arm64 image first.
func TestE2EArm64MakesItsPrerequisites(t *testing.T) {
	dir := checkout(t)
	plan, err := runMake(t, dir, "-n", "e2e-arm64")
	if err != nil {
		t.Fatalf("make -n e2e-arm64: %v\n%s", err, plan)
	}
	steps := []string{"bash hack/deps.sh arm64", "-o bin/vmdock ./cmd/vmdock", "ensure.sh --arch arm64", "false-go-was-run test ", "-tags e2e"}
	at := 0
	for _, step := range steps {
		i := strings.Index(plan[at:], step)
		if i < 0 {
			t.Fatalf("make -n e2e-arm64 lacks %q after what came before:\n%s", step, plan)
		}
		at += i
	}
}

// isE2ETest: a go test run of the e2e build, whatever other flags it has.
func isE2ETest(line string) bool {
	return strings.Contains(line, "false-go-was-run test ") && strings.Contains(line, " -tags e2e ")
}
