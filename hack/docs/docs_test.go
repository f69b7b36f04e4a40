package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/hostagent"
)

// root is the module root: this package's tests run in hack/docs.
const root = "../.."

func readPage(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func report(t *testing.T, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Error(p)
	}
}

func TestPackageTableIsFresh(t *testing.T) {
	current, fresh, err := renderArchitecture(root)
	if err != nil {
		t.Fatal(err)
	}
	if current != fresh {
		t.Errorf("%s: the layers drawing or the package table is stale (a package, its layer, its doc comment's first sentence or its imports changed): run `go run ./hack/docs pkgtable` from the module root and commit the result; first line that differs:\n%s", ArchitecturePage, firstDifference(current, fresh))
	}
}

// firstDifference is the first line where want differs from got, both
// versions, for a failure message.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d now:      %s\nline %d generated: %s", i+1, g[i], i+1, w[i])
		}
	}
	return fmt.Sprintf("the page has %d lines, the generated one %d", len(g), len(w))
}

func TestBootStepsMatchTheHostAgent(t *testing.T) {
	report(t, checkBootSteps(readPage(t, ArchitecturePage)))
}

func TestFirstRunSampleMatchesTheHostAgent(t *testing.T) {
	report(t, checkFirstRun(readPage(t, "README.md"), "README.md"))
}

func TestCheckFirstRunCatchesAStaleSample(t *testing.T) {
	steps := hostagent.StepNames("docker")
	last := strconv.Itoa(len(steps))
	good := "    $ vmdock start\n    [1] " + steps[0] + " ...\n    ...\n    [" + last + "] " + steps[len(steps)-1] + " ...\n"
	if p := checkFirstRun(good, "R"); len(p) != 0 {
		t.Fatalf("a sample of the code's steps: %v", p)
	}
	renamed := strings.Replace(good, "] "+steps[0]+" ", "] config ", 1)
	if p := checkFirstRun(renamed, "R"); len(p) != 1 || !strings.Contains(p[0], "[1] config") {
		t.Errorf("renamed step: %v", p)
	}
	short := strings.Replace(good, "["+last+"] ", "["+strconv.Itoa(len(steps)-1)+"] ", 1)
	if p := checkFirstRun(short, "R"); len(p) != 2 {
		t.Errorf("a sample ending a step early: %v", p)
	}
}

func TestConfigurationKeysMatchTheConfig(t *testing.T) {
	report(t, checkConfigKeys(readPage(t, ConfigurationPage)))
}

func TestRelativeLinksResolve(t *testing.T) {
	pages, err := DocPages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 2 {
		t.Fatalf("found only %v", pages)
	}
	report(t, checkLinks(root, pages))
}

// The checks themselves, on pages made up here: each must fail when its
// subject changes alone.

func TestCheckBootStepsCatchesAMissingAndAMisnamedStep(t *testing.T) {
	var list strings.Builder
	for i, name := range hostagent.StepNames("docker") {
		list.WriteString(strconv.Itoa(i+1) + ". **" + name + "**")
		if name == "docker" || name == "docker-ping" {
			list.WriteString(" or **" + strings.Replace(name, "docker", "containerd", 1) + "**")
		}
		list.WriteString(": what it does.\n")
	}
	page := func(l string) string {
		return "intro\n<!-- host-agent-steps:begin -->\n" + l + "<!-- host-agent-steps:end -->\n"
	}
	if p := checkBootSteps(page(list.String())); len(p) != 0 {
		t.Fatalf("the code's own list: %v", p)
	}
	dropped := strings.Replace(list.String(), "**domains**", "**ready**", 1)
	if p := checkBootSteps(page(dropped)); len(p) != 1 || !strings.Contains(p[0], `"ready", the host agent's is "domains"`) {
		t.Errorf("misnamed step: %v", p)
	}
	lines := strings.SplitAfter(list.String(), "\n")
	short := strings.Join(lines[1:], "")
	if p := checkBootSteps(page(short)); len(p) != 1 || !strings.Contains(p[0], "boot steps") {
		t.Errorf("missing step: %v", p)
	}
	noContainerd := strings.Replace(list.String(), " or **containerd-ping**", "", 1)
	if p := checkBootSteps(page(noContainerd)); len(p) != 1 || !strings.Contains(p[0], `"containerd-ping"`) {
		t.Errorf("containerd name left out: %v", p)
	}
}

func TestCheckConfigKeysCatchesMissingAndUnknownKeys(t *testing.T) {
	page := readPage(t, ConfigurationPage)
	table, err := between(page, configKeysMarker)
	if err != nil {
		t.Fatal(err)
	}
	without := strings.Replace(page, "| `network.portBind` |", "| `network.bindPort` |", 1)
	if without == page {
		t.Fatal("the page has no network.portBind row to rename")
	}
	p := checkConfigKeys(without)
	if len(p) != 2 || !strings.Contains(strings.Join(p, "\n"), `"network.bindPort", which`) || !strings.Contains(strings.Join(p, "\n"), `key "network.portBind"`) {
		t.Errorf("renamed row: %v", p)
	}
	if keys := documentedKeys(table); len(keys) < 40 {
		t.Errorf("the key table names only %d keys: %v", len(keys), keys)
	}
}

func TestCheckLinksCatchesBrokenFilesAndAnchors(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, text string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# vmdock\n\n[ok](docs/a.md#the-sync-mounts-v2) [gone](docs/b.md) [bad anchor](docs/a.md#nope) [self](#vmdock) [web](https://example.com/x)\n\n`[code](docs/none.md)`\n\n    [indented](docs/none.md)\n")
	write("docs/a.md", "# A\n\n## The sync mounts (v2)\n\n[up](../README.md#vmdock)\n")
	got := checkLinks(dir, []string{"README.md", "docs/a.md"})
	if len(got) != 2 || !strings.Contains(got[0], "docs/b.md, which does not exist") || !strings.Contains(got[1], "#nope") {
		t.Errorf("checkLinks: %q", got)
	}
}

func TestNamedRepoPathsExist(t *testing.T) {
	pages, err := DocPages(root)
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := listPackages(root)
	if err != nil {
		t.Fatal(err)
	}
	report(t, checkRepoPaths(root, pages, moduleTopDirs(pkgs)))
}

func TestCheckRepoPathsCatchesAMovedPackage(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "network", "forward"), 0o755); err != nil {
		t.Fatal(err)
	}
	text := "`network/forward` and `network/forward/...` and `network/forward.Rule` stay; `network/dockerctx` moved; `bin/vmdock` is no source path.\n\n```\nnetwork/gone in a code block\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := checkRepoPaths(dir, []string{"README.md"}, map[string]bool{"network": true})
	if len(got) != 1 || !strings.Contains(got[0], "`network/dockerctx`") {
		t.Errorf("checkRepoPaths: %q", got)
	}
}
