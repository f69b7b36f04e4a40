package hostagent

import (
	"fmt"
	"log/slog"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/qemu"
	"github.com/vmdock/vmdock/vm/vz"
)

// newDriver is the one place the host agent picks a VM driver; the
// drivers themselves are linked in here and nowhere else below cmd.
func newDriver(vmType string) (driver.Driver, error) {
	switch vmType {
	case driver.TypeQEMU:
		return qemu.New(qemu.Options{CacheDir: hostCacheDir()}), nil
	case driver.TypeVZ:
		return vz.New(), nil
	}
	return nil, fmt.Errorf("unknown vm type %q (accepted: %s, %s)", vmType, driver.TypeQEMU, driver.TypeVZ)
}

// hostCacheDir keeps per-host verdicts (the accelerator probe) next to the
// image cache; without one every start probes again.
func hostCacheDir() string {
	dir, err := images.DefaultCacheDir()
	if err != nil {
		slog.Warn("no cache folder; the accelerator is probed at every start", "err", err)
		return ""
	}
	return dir
}
