package syncmount

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// mutagenVersion is the pinned Mutagen release; see the package doc.
const mutagenVersion = "v0.18.1"

// TestOnlyMITMutagen checks, for every target vmdock ships, that the package
// links only Mutagen's MIT code: nothing from its SSPL tree (built only with
// the mutagensspl tag), no licensing code, and not Mutagen's SSH handler
// whose protocol slot we reuse.
func TestOnlyMITMutagen(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not found")
	}
	for _, target := range [][2]string{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "arm64"}} {
		t.Run(target[0]+"/"+target[1], func(t *testing.T) {
			for _, line := range listDeps(t, target[0], target[1]) {
				checkDep(t, line)
			}
		})
	}
}

// listDeps returns "importpath module@version files" per dependency.
func listDeps(t *testing.T, goos, goarch string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps",
		"-f", "{{.ImportPath}} {{with .Module}}{{.Path}}@{{.Version}}{{end}} {{join .GoFiles \",\"}}", ".")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list returned too little:\n%s", out)
	}
	return lines
}

func checkDep(t *testing.T, line string) {
	t.Helper()
	fields := strings.Fields(line)
	path := fields[0]
	lower := strings.ToLower(path)
	for _, bad := range []string{"sspl", "licens", "mutagen/pkg/synchronization/protocols/ssh", "mutagen/pkg/agent"} {
		if strings.Contains(lower, bad) {
			t.Errorf("forbidden dependency %s (matches %q)", path, bad)
		}
	}
	if len(fields) < 2 || !strings.HasPrefix(fields[1], "github.com/mutagen-io/mutagen@") {
		return
	}
	if fields[1] != "github.com/mutagen-io/mutagen@"+mutagenVersion {
		t.Errorf("%s comes from %s, want Mutagen %s", path, fields[1], mutagenVersion)
	}
	if len(fields) < 3 {
		return
	}
	for _, f := range strings.Split(fields[2], ",") {
		// zstandard_nosspl.go is the MIT stand-in for the SSPL file.
		if strings.Contains(f, "sspl") && !strings.Contains(f, "nosspl") {
			t.Errorf("%s builds SSPL file %s", path, f)
		}
	}
}
