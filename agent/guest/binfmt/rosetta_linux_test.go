package binfmt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRosettaFirstBoot(t *testing.T) {
	s, fos := newTestServer(t)
	fos.Results = map[string]error{"systemctl is-active": guestostest.ExitErr(3)}
	must(t, os.MkdirAll(filepath.Join(s.Root, rosettaDir), 0o755))
	must(t, os.WriteFile(filepath.Join(s.Root, rosettaDir, "rosettad"), nil, 0o755))

	must(t, s.EnableRosetta(context.Background()))

	if got := readFile(t, filepath.Join(s.Root, binfmtMisc, "register")); got != legacyRosettaRegistration {
		t.Errorf("registered %q", got)
	}
	if got := readFile(t, filepath.Join(s.Root, binfmtConfDir, rosettaBinfmtConf)); got != string(rosettaRule().confFile()) {
		t.Errorf("binfmt.d file = %q", got)
	}
	ran := fos.Ran()
	for _, want := range []string{
		"mount -t virtiofs vmdock-rosetta /mnt/rosetta",
		"mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc",
		"systemd-run --unit vmdock-rosettad.service --collect --property CacheDirectory=rosettad /mnt/rosetta/rosettad daemon /var/cache/rosettad",
	} {
		if !strings.Contains(ran, want) {
			t.Errorf("did not run %q; ran:\n%s", want, ran)
		}
	}
}

// Setup runs again on every reconnect: a registered Rosetta with no rival
// is left alone, and a running rosettad is not started twice.
func TestRosettaAgainIsQuiet(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, os.MkdirAll(filepath.Join(s.Root, binfmtMisc), 0o755))
	must(t, os.MkdirAll(filepath.Join(s.Root, rosettaDir), 0o755))
	must(t, os.WriteFile(filepath.Join(s.Root, rosettaDir, "rosettad"), nil, 0o755))
	must(t, os.WriteFile(filepath.Join(s.Root, binfmtMisc, "rosetta"), []byte("enabled\n"), 0o644))

	must(t, s.EnableRosetta(context.Background()))

	if _, err := os.Stat(filepath.Join(s.Root, binfmtMisc, "register")); err == nil {
		t.Error("registered again with no rival")
	}
	if strings.Contains(fos.Ran(), "systemd-run") {
		t.Errorf("started rosettad while active:\n%s", fos.Ran())
	}
}

// A qemu-x86_64 registered after Rosetta (qemu-user-static installed, or
// update-binfmts run) would take amd64 binaries: Rosetta registers again
// and so comes first.
func TestRosettaReregistersAheadOfARival(t *testing.T) {
	s, _ := newTestServer(t)
	mi := filepath.Join(s.Root, binfmtMisc)
	must(t, os.MkdirAll(mi, 0o755))
	must(t, os.WriteFile(filepath.Join(mi, "rosetta"), []byte("enabled\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(mi, "status"), []byte("enabled\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(mi, "qemu-x86_64"), []byte("enabled\ninterpreter /usr/bin/qemu-x86_64-static\nflags: F\noffset 0\nmagic 7f454c4602010100000000000000000002003e00\nmask fffffffffffefe00fffffffffffffffffeffffff\n"), 0o644))

	must(t, s.EnableRosetta(context.Background()))

	if got := readFile(t, filepath.Join(mi, "rosetta")); got != "-1" {
		t.Errorf("old Rosetta entry got %q, want -1 (unregister)", got)
	}
	if got := readFile(t, filepath.Join(mi, "register")); got != legacyRosettaRegistration {
		t.Errorf("registered %q", got)
	}
}

// macOS 13 ships no rosettad: nothing to start, nothing to warn about.
func TestRosettaWithoutCacheDaemon(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, s.EnableRosetta(context.Background()))
	if strings.Contains(fos.Ran(), "rosettad") {
		t.Errorf("tried rosettad without one in the share:\n%s", fos.Ran())
	}
}
