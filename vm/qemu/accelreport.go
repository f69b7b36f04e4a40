package qemu

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/vmdock/vmdock/vm/driver"
)

// ReportAccel answers for an arch guest the way Start decides: the cached
// verdict when one matches this kernel and QEMU, else a probe boot whose
// conclusive verdict is cached for the next start. The error means there
// is no QEMU to ask.
func (d *Driver) ReportAccel(ctx context.Context, arch string) (driver.AccelReport, error) {
	bin, err := d.binary(arch)
	if err != nil {
		return driver.AccelReport{}, err
	}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(vctx, bin, "--version").Output()
	if err != nil {
		return driver.AccelReport{}, fmt.Errorf("run %s --version: %w", bin, err)
	}
	v, err := ParseVersion(string(out))
	if err != nil {
		return driver.AccelReport{}, err
	}
	r := driver.AccelReport{Binary: bin, Version: v.String(), MinVersion: minVersion.String(),
		TooOld: !v.AtLeast(minVersion.Major, minVersion.Minor)}
	facts := d.hostAccelFacts(driver.Spec{Arch: arch})
	r.Native = facts.Native
	if facts.DeviceErr != nil {
		r.DeviceError = facts.DeviceErr.Error()
	}
	choice, err := decideAccel(facts, func(accel string) error {
		if cached, ok := d.readVerdict(verdictKey(bin, v, arch, accel, probeBoot{})); ok {
			r.FromCache, r.Checked = true, cached.Checked
		}
		return d.probeCached(ctx, bin, v, arch, accel, probeBoot{})
	})
	if err != nil {
		return r, err
	}
	r.Accel, r.Reason = choice.Accel, choice.Reason
	return r, nil
}

// readVerdict is the cached verdict for key, if there is one.
func (d *Driver) readVerdict(key string) (accelVerdict, bool) {
	path := d.verdictPath(key)
	if path == "" {
		return accelVerdict{}, false
	}
	var v accelVerdict
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &v) != nil || v.Key != key {
		return accelVerdict{}, false
	}
	return v, true
}
