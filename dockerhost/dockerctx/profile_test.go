package dockerctx

import (
	"path/filepath"
	"testing"
)

// Start switches to the profile's context and remembers the user's;
// a second start keeps the user's, not ours; stop puts the user's back.
func TestProfileActivateRemembersAndRestores(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	if err := Ensure("mine", "unix:///mine.sock", "the user's"); err != nil {
		t.Fatal(err)
	}
	if err := Use("mine"); err != nil {
		t.Fatal(err)
	}
	p := Profile{Name: "default", Socket: "/x/docker.sock", StatePath: filepath.Join(t.TempDir(), "state.json")}
	for i := 0; i < 2; i++ {
		if err := p.Activate(true); err != nil {
			t.Fatal(err)
		}
		if cur := Current(); cur != "vmdock" {
			t.Fatalf("start %d: current = %q, want vmdock", i+1, cur)
		}
	}
	if got := p.load().PreviousContext; got != "mine" {
		t.Fatalf("remembered %q, want mine", got)
	}
	p.Restore()
	if cur := Current(); cur != "mine" {
		t.Fatalf("after restore: current = %q, want mine", cur)
	}
	if got := p.load().PreviousContext; got != "" {
		t.Fatalf("still remembering %q after restore", got)
	}
}

// A user who switched away by hand keeps their choice on stop, and a
// profile started without activation switches nothing.
func TestProfileRestoreLeavesAHandChosenContext(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	for _, n := range []string{"mine", "other"} {
		if err := Ensure(n, "unix:///"+n+".sock", n); err != nil {
			t.Fatal(err)
		}
	}
	if err := Use("mine"); err != nil {
		t.Fatal(err)
	}
	p := Profile{Name: "dev", Socket: "/x/docker.sock", StatePath: filepath.Join(t.TempDir(), "state.json")}
	if err := p.Activate(false); err != nil {
		t.Fatal(err)
	}
	if cur := Current(); cur != "mine" || !Exists("vmdock-dev") {
		t.Fatalf("activate without use: current %q, vmdock-dev exists %v", cur, Exists("vmdock-dev"))
	}
	if err := p.Activate(true); err != nil {
		t.Fatal(err)
	}
	if err := Use("other"); err != nil {
		t.Fatal(err)
	}
	p.Restore()
	if cur := Current(); cur != "other" {
		t.Fatalf("restore overrode the user's switch: current = %q, want other", cur)
	}
}

// delete removes the profile's own context and leaves the user's alone.
func TestProfileRemoveDeletesOnlyItsContext(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	if err := Ensure("mine", "unix:///mine.sock", "the user's"); err != nil {
		t.Fatal(err)
	}
	p := Profile{Name: "dev", Socket: "/x/docker.sock", StatePath: filepath.Join(t.TempDir(), "state.json")}
	if err := p.Activate(false); err != nil {
		t.Fatal(err)
	}
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if !s.Exists(Name("dev")) {
		t.Fatalf("context %s was not made", Name("dev"))
	}
	p.Remove()
	if s.Exists(Name("dev")) || !s.Exists("mine") {
		t.Errorf("after Remove: %s exists %v, mine exists %v; want only mine", Name("dev"), s.Exists(Name("dev")), s.Exists("mine"))
	}
}
