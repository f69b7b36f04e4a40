package qemu

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scriptedQEMU is a qemu-system-* that prints version and, for any boot
// (the probe), notes it in the returned file and dies as a broken kvm does.
func scriptedQEMU(t *testing.T, version string) (bin, boots string) {
	t.Helper()
	dir := t.TempDir()
	boots = filepath.Join(dir, "boots")
	script := `#!/bin/sh
if [ "$1" = --version ]; then echo "QEMU emulator version ` + version + `"; exit 0; fi
echo boot >> '` + boots + `'
echo "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69" >&2
exit 1
`
	bin = filepath.Join(dir, "qemu-system-fake")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, boots
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestReportAccelProbesOnceThenReadsTheCache(t *testing.T) {
	bin, boots := scriptedQEMU(t, "8.2.2")
	d := New(Options{Binary: bin, CacheDir: t.TempDir(), accelDevice: workingDevice})
	first, err := d.ReportAccel(context.Background(), hostArch())
	if err != nil {
		t.Fatal(err)
	}
	if first.Accel != AccelTCG || !strings.Contains(first.Reason, "kvm unusable") || !strings.Contains(first.Reason, "failed to set MSR") ||
		first.FromCache || first.DeviceError != "" || first.Version != "8.2.2" || first.TooOld || first.Native != AccelKVM {
		t.Errorf("first report = %+v; want tcg, probed now, quoting QEMU", first)
	}
	second, err := d.ReportAccel(context.Background(), hostArch())
	if err != nil {
		t.Fatal(err)
	}
	if !second.FromCache || second.Checked.IsZero() || second.Accel != AccelTCG || second.Reason != first.Reason {
		t.Errorf("second report = %+v; want the cached verdict of the first", second)
	}
	if n := countLines(t, boots); n != 1 {
		t.Errorf("QEMU booted %d times over two reports; want 1", n)
	}
}

func TestReportAccelOldQEMUWithoutDevice(t *testing.T) {
	bin, boots := scriptedQEMU(t, "5.2.0")
	missing := func() (string, error) { return AccelKVM, os.ErrPermission }
	r, err := New(Options{Binary: bin, accelDevice: missing}).ReportAccel(context.Background(), hostArch())
	if err != nil {
		t.Fatal(err)
	}
	if !r.TooOld || r.MinVersion != minVersion.String() || r.Accel != AccelTCG || !strings.Contains(r.Reason, "kvm unavailable") || r.DeviceError == "" {
		t.Errorf("report = %+v", r)
	}
	if n := countLines(t, boots); n != 0 {
		t.Errorf("QEMU booted %d times without a device; want 0", n)
	}
}

func TestReportAccelWithoutQEMU(t *testing.T) {
	_, err := New(Options{Binary: filepath.Join(t.TempDir(), "none")}).ReportAccel(context.Background(), hostArch())
	if err == nil {
		t.Fatal("no error for a missing QEMU")
	}
}
