package vz

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/driver"
)

func TestDeriveMACIsStableUnicastLocal(t *testing.T) {
	a := deriveMAC("/Users/ann/.vmdock/default")
	if len(a) != 6 || a[0]&0x01 != 0 || a[0]&0x02 == 0 {
		t.Fatalf("deriveMAC = %s, want a unicast, locally administered 48-bit address", a)
	}
	if b := deriveMAC("/Users/ann/.vmdock/default/"); !bytes.Equal(a, b) {
		t.Errorf("same folder, two spellings: %s and %s", a, b)
	}
	if b := deriveMAC("/Users/bob/.vmdock/default"); bytes.Equal(a, b) {
		t.Errorf("two users' default instances share %s", a)
	}
}

func TestInstanceMACIsStoredAndKept(t *testing.T) {
	dir := t.TempDir()
	first, err := instanceMAC(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, deriveMAC(dir)) {
		t.Errorf("first start: %s, want the derived %s", first, deriveMAC(dir))
	}
	path := filepath.Join(dir, driver.VZMACFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("stored file: %v, %v", fi, err)
	}
	// The stored address wins over the derivation: an instance folder that
	// moved keeps its MAC (and its DHCP lease, and its saved state).
	if err := os.WriteFile(path, []byte("02:00:00:aa:bb:cc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := instanceMAC(dir)
	if err != nil || again.String() != "02:00:00:aa:bb:cc" {
		t.Errorf("second start: %s, %v; want the stored address", again, err)
	}
}

func TestInstanceMACRefusesADamagedFile(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":   "not a mac",
		"empty":     "",
		"multicast": "03:00:00:00:00:01",
		"global":    "00:1c:42:00:00:01",
		"64-bit":    "02:00:00:00:00:00:00:01",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, driver.VZMACFile)
			os.WriteFile(path, []byte(content), 0o600)
			_, err := instanceMAC(dir)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "remove it") {
				t.Errorf("instanceMAC = %v, want an error naming %s and the way out", err, path)
			}
			if b, _ := os.ReadFile(path); string(b) != content {
				t.Errorf("the damaged file was replaced by %q", b)
			}
		})
	}
}

func TestInstanceMachineIDIsCreatedOnce(t *testing.T) {
	dir := t.TempDir()
	made := 0
	create := func() ([]byte, error) {
		made++
		return []byte("bplist00 machine id"), nil
	}
	first, err := instanceMachineID(dir, create)
	if err != nil {
		t.Fatal(err)
	}
	second, err := instanceMachineID(dir, create)
	if err != nil {
		t.Fatal(err)
	}
	if made != 1 || !bytes.Equal(first, second) || string(first) != "bplist00 machine id" {
		t.Errorf("created %d times; %q then %q", made, first, second)
	}
	if fi, err := os.Stat(filepath.Join(dir, driver.VZMachineIDFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("stored file: %v, %v", fi, err)
	}
}

func TestInstanceMachineIDRefusesADamagedFile(t *testing.T) {
	for name, content := range map[string][]byte{
		"empty":   {},
		"too big": bytes.Repeat([]byte{1}, maxMachineIDSize+1),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, driver.VZMachineIDFile)
			os.WriteFile(path, content, 0o600)
			_, err := instanceMachineID(dir, func() ([]byte, error) {
				t.Error("a damaged identifier was replaced by a new one")
				return []byte("new"), nil
			})
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "remove it") {
				t.Errorf("instanceMachineID = %v, want an error naming %s and the way out", err, path)
			}
		})
	}
}

func TestInstanceMachineIDCreateFailures(t *testing.T) {
	dir := t.TempDir()
	boom := errors.New("unsupported macOS")
	if _, err := instanceMachineID(dir, func() ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("create error: %v", err)
	}
	if _, err := instanceMachineID(dir, func() ([]byte, error) { return nil, nil }); err == nil {
		t.Error("an empty new identifier was stored")
	}
	if _, err := os.Stat(filepath.Join(dir, driver.VZMachineIDFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed creation left a file: %v", err)
	}
}

func TestIdentityNeedsTheInstanceFolder(t *testing.T) {
	if _, err := instanceMAC(""); err == nil {
		t.Error("instanceMAC without a folder")
	}
	if _, err := instanceMachineID("", func() ([]byte, error) { return []byte("x"), nil }); err == nil {
		t.Error("instanceMachineID without a folder")
	}
}

// An identity file that cannot be read or written is an error naming
// what failed, never a new identity in its place.
func TestIdentityFilesUnreadableOrUnwritable(t *testing.T) {
	unreadable := t.TempDir()
	for _, f := range []string{driver.VZMACFile, driver.VZMachineIDFile} {
		mustMkdir(t, filepath.Join(unreadable, f))
	}
	if _, err := instanceMAC(unreadable); err == nil || !strings.Contains(err.Error(), "read the VM's MAC address") {
		t.Errorf("instanceMAC with a folder at its file: %v", err)
	}
	created := false
	create := func() ([]byte, error) { created = true; return []byte("id"), nil }
	if _, err := instanceMachineID(unreadable, create); err == nil || !strings.Contains(err.Error(), unreadable) || created {
		t.Errorf("instanceMachineID with a folder at its file: %v (created a new one: %v)", err, created)
	}

	gone := filepath.Join(t.TempDir(), "gone")
	if _, err := instanceMAC(gone); err == nil || !strings.Contains(err.Error(), "store the VM's MAC address") {
		t.Errorf("instanceMAC in a missing folder: %v", err)
	}
	if _, err := instanceMachineID(gone, create); err == nil || !strings.Contains(err.Error(), "store the machine identifier") {
		t.Errorf("instanceMachineID in a missing folder: %v", err)
	}
}
