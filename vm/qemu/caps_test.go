package qemu

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/mounts"
)

// countingVirtiofsd puts a Rust-dialect virtiofsd first on PATH that records
// each run's arguments and fails anything but --help; it returns a
// function that counts the --help runs. The process-wide probe is reset so
// this test sees a fresh process.
func countingVirtiofsd(t *testing.T) (helpRuns func() int) {
	t.Helper()
	bin, log := t.TempDir(), filepath.Join(t.TempDir(), "runs")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\n" +
		"[ \"$1\" = --help ] || { echo 'fake virtiofsd serves nothing' >&2; exit 1; }\n" +
		"echo 'Usage: virtiofsd [OPTIONS] --shared-dir <SHARED_DIR>'\n"
	if err := os.WriteFile(filepath.Join(bin, "virtiofsd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	saved := hostCaps
	hostCaps = &capsCache{}
	t.Cleanup(func() { hostCaps = saved })
	return func() int {
		b, _ := os.ReadFile(log)
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			if line == "--help" {
				n++
			}
		}
		return n
	}
}

func TestVirtiofsdProbedOncePerProcess(t *testing.T) {
	helpRuns := countingVirtiofsd(t)
	var first HostCaps
	for i := 0; i < 3; i++ {
		c := Capabilities()
		if i == 0 {
			first = c
		}
		if c.UsableVirtiofsd() == "" || !c.Virtiofsd.Rust || c != first {
			t.Fatalf("Capabilities = %+v, want the fake Rust virtiofsd every time", c)
		}
	}
	d := New(Options{})
	for i := 0; i < 2; i++ {
		if v, err := d.virtiofsd(); err != nil || v != first.Virtiofsd {
			t.Fatalf("driver's virtiofsd = %+v, %v; want %+v", v, err, first.Virtiofsd)
		}
	}
	if n := helpRuns(); n != 1 {
		t.Fatalf("virtiofsd --help ran %d times, want 1", n)
	}

	// A boot prepares the spec and starts it, which used to probe twice
	// more: the driver asks the same per-process answer.
	t.Run("prepare and start a virtiofs spec", func(t *testing.T) {
		needQEMU(t)
		spec := pausedSpec(t, shortDir(t))
		allShares(&spec, mounts.TypeVirtiofs)
		d := pausedDriver()
		_, err := d.Start(context.Background(), mustPrepare(t, d, spec))
		if err == nil || !strings.Contains(err.Error(), "virtiofsd for") {
			t.Fatalf("Start with the fake virtiofsd = %v, want its failure", err)
		}
		if n := helpRuns(); n != 1 {
			t.Fatalf("virtiofsd --help ran %d times, want 1", n)
		}
	})
}

func TestUsableVirtiofsd(t *testing.T) {
	legacyWant := ""
	if os.Geteuid() == 0 {
		legacyWant = "/usr/lib/qemu/virtiofsd"
	}
	for _, tt := range []struct {
		name string
		caps HostCaps
		want string
	}{
		{"none found", HostCaps{}, ""},
		{"rust daemon", HostCaps{Virtiofsd: Virtiofsd{Path: "/usr/libexec/virtiofsd", Rust: true}}, "/usr/libexec/virtiofsd"},
		{"legacy daemon needs root", HostCaps{Virtiofsd: Virtiofsd{Path: "/usr/lib/qemu/virtiofsd"}}, legacyWant},
		{"daemon that cannot say its dialect", HostCaps{Virtiofsd: Virtiofsd{Path: "/x", Rust: true}, virtiofsdErr: os.ErrPermission}, ""},
	} {
		if got := tt.caps.UsableVirtiofsd(); got != tt.want {
			t.Errorf("%s: UsableVirtiofsd = %q, want %q", tt.name, got, tt.want)
		}
	}
}
