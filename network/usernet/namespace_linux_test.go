package usernet

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// inNamespacesEnv marks the test binary run again inside namespaces of
// its own.
const inNamespacesEnv = "USERNET_TEST_IN_NAMESPACES"

// The unshare flags of the namespaces the tests run in: a mount namespace
// to bind files over /etc, a network namespace so whatever the test dials
// stays in there, or both.
var (
	mountNS    = []string{"--mount", "--propagation", "private"}
	netNS      = []string{"--net"}
	netMountNS = []string{"--net", "--mount", "--propagation", "private"}
)

// inNamespaces runs the calling test again under `unshare flags` and
// reports its result; it returns true only in that inner run, where the
// test goes on. Beside root and unshare the test needs tools: without
// them it skips, and fails under CI.
func inNamespaces(t *testing.T, flags []string, tools ...string) bool {
	t.Helper()
	if os.Getenv(inNamespacesEnv) != "" {
		return true
	}
	need := append([]string{"unshare"}, tools...)
	ok := os.Geteuid() == 0
	for _, tool := range need {
		ok = ok && haveCommand(tool)
	}
	if !ok {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs root and %s (hack/deps.sh installs them)", strings.Join(need, ", "))
		}
		t.Skipf("needs root and %s", strings.Join(need, ", "))
	}
	args := append(append([]string(nil), flags...), os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v")
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), inNamespacesEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in namespaces of its own (unshare %s):\n%s", strings.Join(flags, " "), out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Fatal("the test skipped inside its namespaces")
	}
	return false
}

func haveCommand(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}
