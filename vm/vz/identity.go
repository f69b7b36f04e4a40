package vz

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/internal/fsutil"
	"github.com/vmdock/vmdock/vm/driver"
)

// A vz VM gets the same identity at every start, kept in the instance
// folder:
//   - its NIC's MAC address, so macOS's DHCP server hands the guest the
//     same lease (and IP) instead of piling up one lease per boot;
//   - its VZGenericMachineIdentifier, which a saved state is bound to:
//     Virtualization.framework restores a state only into a VM with the
//     same identifier and MAC address.
//
// A damaged identity file is refused with an error naming it, never
// replaced behind the user's back: a new identity silently orphans the
// saved state and the guest's DHCP lease. Removing the file is the
// documented way to get a new one.

// maxMachineIDSize bounds what is read as a machine identifier; Apple's
// data representation is a small property list.
const maxMachineIDSize = 4096

// instanceMAC is the instance's MAC address: the stored one, or on the
// first start one derived from the folder and stored.
func instanceMAC(dir string) (net.HardwareAddr, error) {
	if dir == "" {
		return nil, errors.New("vz: the instance folder is needed to keep the VM's MAC address")
	}
	path := filepath.Join(dir, driver.VZMACFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		mac := deriveMAC(dir)
		if err := atomicfile.WriteFile(path, []byte(mac.String()+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("vz: store the VM's MAC address: %w", err)
		}
		return mac, nil
	}
	if err != nil {
		return nil, fmt.Errorf("vz: read the VM's MAC address: %w", err)
	}
	mac, err := parseMAC(string(bytes.TrimSpace(b)))
	if err != nil {
		return nil, fmt.Errorf("vz: %s is damaged (%v); remove it to give the VM a new MAC address (its DHCP lease and any saved state are then lost)", path, err)
	}
	return mac, nil
}

// parseMAC accepts only what deriveMAC makes: a unicast, locally
// administered 48-bit address.
func parseMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil {
		return nil, err
	}
	if len(mac) != 6 {
		return nil, fmt.Errorf("%s is not a 48-bit MAC address", s)
	}
	if mac[0]&0x01 != 0 || mac[0]&0x02 == 0 {
		return nil, fmt.Errorf("%s is not a unicast, locally administered MAC address", s)
	}
	return mac, nil
}

// deriveMAC hashes the instance folder into a unicast, locally
// administered address. The folder, not the instance name: two users'
// "default" instances run side by side on vz's one NAT network. The same
// folder gets the same address again after a delete and create, and with
// it the same DHCP lease.
func deriveMAC(dir string) net.HardwareAddr {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = filepath.Clean(dir)
	}
	sum := sha256.Sum256([]byte("vmdock vz mac\x00" + abs))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&^0x01 | 0x02 // unicast, locally administered
	return mac
}

// instanceMachineID is the data representation of the instance's
// VZGenericMachineIdentifier: the stored one, or on the first start a new
// one from create, stored. The caller turns it into the vz object and
// refuses it with damagedMachineID when vz does not recognise it.
func instanceMachineID(dir string, create func() ([]byte, error)) ([]byte, error) {
	if dir == "" {
		return nil, errors.New("vz: the instance folder is needed to keep the VM's machine identifier")
	}
	path := filepath.Join(dir, driver.VZMachineIDFile)
	b, err := fsutil.ReadFileMax(path, maxMachineIDSize)
	if errors.Is(err, os.ErrNotExist) {
		b, err := create()
		if err != nil {
			return nil, fmt.Errorf("vz: create a machine identifier: %w", err)
		}
		if len(b) == 0 {
			return nil, errors.New("vz: Virtualization.framework made an empty machine identifier")
		}
		if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
			return nil, fmt.Errorf("vz: store the machine identifier: %w", err)
		}
		return b, nil
	}
	if err != nil {
		return nil, damagedMachineID(dir, err)
	}
	if len(b) == 0 {
		return nil, damagedMachineID(dir, errors.New("the file is empty"))
	}
	return b, nil
}

// damagedMachineID is the error for a machine identifier file that cannot
// be used.
func damagedMachineID(dir string, why error) error {
	return fmt.Errorf("vz: %s is damaged (%w); remove it to give the VM a new machine identifier (any saved state is then lost)", filepath.Join(dir, driver.VZMachineIDFile), why)
}
