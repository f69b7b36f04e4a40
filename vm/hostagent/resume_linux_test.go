package hostagent

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/driver"
)

// resumingDriver is fakeDriver with a Resume that refuses the state the
// way a driver refuses one saved by another hypervisor.
type resumingDriver struct {
	fakeDriver
	resumeErr error
}

func (d *resumingDriver) SaveBlocker(driver.Spec) error { return nil }

func (d *resumingDriver) Resume(context.Context, driver.Plan, string, driver.SavedState, string) (driver.Machine, error) {
	return nil, d.resumeErr
}

// coldMachine is a VM that runs until stopped.
type coldMachine struct{ done chan struct{} }

func (m *coldMachine) DialAgent(context.Context) (net.Conn, error) {
	return nil, errors.New("no agent")
}
func (m *coldMachine) Stop(context.Context, bool) error { return nil }
func (m *coldMachine) Wait() error                      { <-m.done; return nil }
func (m *coldMachine) Info() driver.MachineInfo         { return driver.MachineInfo{Driver: "fake"} }

// A saved state the fingerprint accepts but the driver cannot load (saved
// by another QEMU, or from other virtual hardware, as after an upgrade of
// either) boots cold in the same start: one line says why, the state is
// dropped, and the data disk comes through as it was.
func TestResumeRefusedByTheDriverBootsCold(t *testing.T) {
	for _, refusal := range []string{
		"the state was saved by QEMU 8.2.2, this is QEMU 9.2.0",
		"the VM's virtual hardware changed since the save (another vmdock or QEMU configuration)",
	} {
		ha := resumeAgent(t)
		data := append([]byte("the user's volumes"), make([]byte, 8000)...)
		must(t, os.WriteFile(ha.inst.DataDiskPath(), data, 0o600))
		imgDisk := filepath.Join(t.TempDir(), "image.raw")
		must(t, os.WriteFile(imgDisk, make([]byte, 4096), 0o600))
		ha.boot.img.Disk = imgDisk
		ha.boot.spec.SerialLog = ha.inst.SerialLogPath()
		ha.opts.setDefaults()
		saveFor(t, ha)
		must(t, ha.stepSavedState(context.Background()))
		if ha.boot.resumeFrom == nil {
			t.Fatalf("the fingerprint refused the state:\n%s", notes(ha))
		}
		m := &coldMachine{done: make(chan struct{})}
		d := &resumingDriver{fakeDriver: fakeDriver{m: m}, resumeErr: errors.New(refusal)}
		plan, err := d.Prepare(ha.boot.spec)
		must(t, err)
		ha.boot.driver, ha.boot.plan = d, plan

		if err := ha.stepVM(context.Background()); err != nil {
			t.Fatalf("the start failed instead of booting cold: %v", err)
		}
		close(m.done)
		if ha.currentMachine() != m || d.started.Name != "default" {
			t.Errorf("no cold boot after the refused resume (machine %v)", ha.currentMachine())
		}
		n := notes(ha)
		want := "could not resume the saved VM: " + refusal + "; booting cold\n"
		if !strings.HasSuffix(n, want) || strings.Count(n, "could not resume") != 1 {
			t.Errorf("notes:\n%s\nwant the one line %q", n, want)
		}
		if _, err := os.Stat(ha.inst.SavedStateDir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused state is kept (%v)", err)
		}
		f, err := os.Open(ha.inst.DataDiskPath()) // grown sparse to the config's size
		must(t, err)
		got := make([]byte, len(data))
		_, err = f.ReadAt(got, 0)
		f.Close()
		must(t, err)
		if !bytes.Equal(got, data) {
			t.Error("the data disk's content changed in the cold boot")
		}
	}
}
