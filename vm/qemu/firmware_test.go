package qemu

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindFirmware(t *testing.T) {
	tests := []struct {
		name      string
		arch      string
		shareDirs []string
		files     []string
		want      Firmware
		wantErr   string
	}{
		{
			name:  "debian ovmf 4M preferred",
			arch:  "x86_64",
			files: []string{"/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd", "/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"},
			want:  Firmware{Code: "/usr/share/OVMF/OVMF_CODE_4M.fd", VarsTemplate: "/usr/share/OVMF/OVMF_VARS_4M.fd"},
		},
		{
			name:  "code without vars template",
			arch:  "x86_64",
			files: []string{"/usr/share/OVMF/OVMF_CODE.fd"},
			want:  Firmware{Code: "/usr/share/OVMF/OVMF_CODE.fd"},
		},
		{
			name:      "firmware next to the qemu binary wins",
			arch:      "aarch64",
			shareDirs: []string{"/opt/q/share/qemu"},
			files:     []string{"/usr/share/AAVMF/AAVMF_CODE.fd", "/opt/q/share/qemu/edk2-aarch64-code.fd", "/opt/q/share/qemu/edk2-arm-vars.fd"},
			want:      Firmware{Code: "/opt/q/share/qemu/edk2-aarch64-code.fd", VarsTemplate: "/opt/q/share/qemu/edk2-arm-vars.fd"},
		},
		{
			name:  "debian aavmf",
			arch:  "aarch64",
			files: []string{"/usr/share/AAVMF/AAVMF_CODE.fd", "/usr/share/AAVMF/AAVMF_VARS.fd"},
			want:  Firmware{Code: "/usr/share/AAVMF/AAVMF_CODE.fd", VarsTemplate: "/usr/share/AAVMF/AAVMF_VARS.fd"},
		},
		{
			name:  "homebrew arm64 prefix",
			arch:  "x86_64",
			files: []string{"/opt/homebrew/share/qemu/edk2-x86_64-code.fd"},
			want:  Firmware{Code: "/opt/homebrew/share/qemu/edk2-x86_64-code.fd"},
		},
		{name: "no x86 firmware", arch: "x86_64", files: []string{"/usr/share/AAVMF/AAVMF_CODE.fd"}, wantErr: "install the ovmf package"},
		{name: "no arm firmware", arch: "aarch64", files: []string{"/usr/share/OVMF/OVMF_CODE.fd"}, wantErr: "install the qemu-efi-aarch64 package"},
		{name: "secure boot build is not used", arch: "x86_64", files: []string{"/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"}, wantErr: "no UEFI firmware for x86_64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exists := func(p string) bool {
				for _, f := range tt.files {
					if f == p {
						return true
					}
				}
				return false
			}
			got, err := findFirmware(tt.arch, tt.shareDirs, exists)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("findFirmware = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestShareDirsFor(t *testing.T) {
	got := shareDirsFor("/nonexistent/prefix/bin/qemu-system-aarch64")
	if len(got) != 1 || got[0] != "/nonexistent/prefix/share/qemu" {
		t.Errorf("shareDirsFor = %q", got)
	}
	if shareDirsFor("") != nil {
		t.Error("shareDirsFor(\"\") not nil")
	}
}

func TestPrepareEFIVars(t *testing.T) {
	src := t.TempDir()
	code := filepath.Join(src, "code.fd")
	tmpl := filepath.Join(src, "vars.fd")
	if err := os.WriteFile(code, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmpl, []byte("template-vars"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("copies the template once", func(t *testing.T) {
		dir := t.TempDir()
		if err := prepareEFIVars(dir, Firmware{Code: code, VarsTemplate: tmpl}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(EFIVarsPath(dir)); string(b) != "template-vars" {
			t.Fatalf("vars = %q", b)
		}
		// The guest's saved variables must survive the next start.
		if err := os.WriteFile(EFIVarsPath(dir), []byte("guest-changed"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := prepareEFIVars(dir, Firmware{Code: code, VarsTemplate: tmpl}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(EFIVarsPath(dir)); string(b) != "guest-changed" {
			t.Fatalf("vars overwritten: %q", b)
		}
	})
	t.Run("erased store sized like the code", func(t *testing.T) {
		dir := t.TempDir()
		if err := prepareEFIVars(dir, Firmware{Code: code}); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(EFIVarsPath(dir))
		if len(b) != 4096 || !bytes.Equal(b, make([]byte, 4096)) {
			t.Fatalf("vars: %d bytes", len(b))
		}
	})
	t.Run("missing template fails and leaves nothing", func(t *testing.T) {
		dir := t.TempDir()
		err := prepareEFIVars(dir, Firmware{Code: code, VarsTemplate: filepath.Join(src, "nope.fd")})
		if err == nil {
			t.Fatal("no error")
		}
		if _, err := os.Stat(EFIVarsPath(dir)); !os.IsNotExist(err) {
			t.Fatalf("vars file left behind: %v", err)
		}
	})
}
