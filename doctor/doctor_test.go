package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/macos"
	"github.com/vmdock/vmdock/vm/remote"
	"github.com/vmdock/vmdock/vm/store"
)

const signedOutput = `Executable=/usr/local/bin/vmdock
[Dict]
	[Key] com.apple.security.virtualization
	[Value]
		[Bool] true
`

// fakeHost is a host where everything a start needs is in place; each test
// breaks one thing. Programs answer from outputs, keyed by name.
type fakeHost struct {
	Facts
	outputs  map[string]string
	files    map[string]bool
	contents map[string]string // files ReadFile finds
	env      map[string]string
	qemuErr  error
	qemu     driver.AccelReport
	image    images.DefaultImage
	imgErr   error
	free     uint64
	status   *instance.LiveStatus // nil: not created
	qemuRuns int
}

func newFake(t *testing.T, h config.Host) *fakeHost {
	t.Helper()
	inst, err := store.Open(filepath.Join("/Users/ann", ".vmdock"), "default")
	if err != nil {
		t.Fatal(err)
	}
	fh := &fakeHost{
		outputs:  map[string]string{"codesign": signedOutput, "docker": "Docker version 27.3.1, build ce12230\n"},
		files:    map[string]bool{rosettaRuntime: true},
		env:      map[string]string{"HOME": "/Users/ann"},
		contents: map[string]string{},
		qemu:     driver.AccelReport{Binary: "/usr/bin/qemu-system-x86_64", Version: "8.2.2", MinVersion: "6.2.0", Native: "kvm", Accel: "kvm", FromCache: true, Checked: time.Now()},
		image:    images.DefaultImage{Arch: h.Arch, Source: images.SourceDownload, URL: "https://example.com/vmdock-arm64.tar.zst", Digest: "sha256:0123456789abcdef", Cached: true},
		free:     100 << 30,
	}
	fh.Facts = Facts{
		Host:         h,
		CGO:          true,
		Kernel:       "6.8.0",
		Executable:   "/usr/local/bin/vmdock",
		SunPathMax:   108,
		Instance:     inst,
		CacheDir:     "/Users/ann/Library/Caches/vmdock",
		Config:       config.Default(h),
		ConfigSource: "defaults",
		Run: func(_ context.Context, name string, _ ...string) (string, error) {
			out, ok := fh.outputs[filepath.Base(name)]
			if !ok {
				return "", errors.New("exec: " + name + ": not found")
			}
			if strings.Contains(out, "not signed") {
				return out, errors.New("exit status 1")
			}
			return out, nil
		},
		LookPath: func(file string) (string, error) {
			if _, ok := fh.outputs[file]; ok {
				return "/usr/local/bin/" + file, nil
			}
			return "", errors.New("not found")
		},
		Exists: func(p string) bool { return fh.files[p] },
		Getenv: func(k string) string { return fh.env[k] },
		ReadFile: func(p string) ([]byte, error) {
			c, ok := fh.contents[p]
			if !ok {
				return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
			}
			return []byte(c), nil
		},
		QEMU: func(context.Context, string) (driver.AccelReport, error) {
			fh.qemuRuns++
			return fh.qemu, fh.qemuErr
		},
		DockerContext: func() string { return "vmdock" },
		DefaultImage: func(context.Context, string, string) (images.DefaultImage, error) {
			return fh.image, fh.imgErr
		},
		FreeBytes: func(string) (uint64, error) { return fh.free, nil },
		InstanceStatus: func(context.Context) (bool, instance.LiveStatus) {
			if fh.status == nil {
				return false, instance.LiveStatus{}
			}
			return true, *fh.status
		},
	}
	fh.Config.Normalize()
	if h.OS == osDarwin {
		fh.SunPathMax = 104
	}
	return fh
}

func mac(version, arch string) config.Host {
	return config.Host{OS: osDarwin, Arch: arch, MacOSVersion: version, CPUs: 8, VZ: macos.VZSupported(version), Accel: "hvf"}
}

func linux() config.Host {
	return config.Host{OS: osLinux, Arch: "amd64", CPUs: 8, Accel: "kvm", Virtiofsd: "/usr/libexec/virtiofsd"}
}

// result runs the whole report and returns the row named name.
func (fh *fakeHost) result(t *testing.T, name string) Result {
	t.Helper()
	for _, r := range Run(context.Background(), fh.Facts).Checks {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no %q check", name)
	return Result{}
}

func expect(t *testing.T, r Result, status Status, inMessage, inFix string) {
	t.Helper()
	if r.Status != status || !strings.Contains(r.Message, inMessage) || !strings.Contains(r.Fix, inFix) {
		t.Errorf("%s = %+v; want %s with %q in the message and %q in the fix", r.Name, r, status, inMessage, inFix)
	}
	if r.Status != OK && r.Fix == "" {
		t.Errorf("%s is %s without a fix", r.Name, r.Status)
	}
}

func TestHealthyHostsPass(t *testing.T) {
	for name, h := range map[string]config.Host{"mac": mac("14.5", "arm64"), "linux": linux()} {
		t.Run(name, func(t *testing.T) {
			fh := newFake(t, h)
			if h.OS == osLinux {
				fh.outputs["virtiofsd"] = "virtiofsd 1.10.1\n"
			}
			r := Run(context.Background(), fh.Facts)
			for _, c := range r.Checks {
				if c.Status != OK {
					t.Errorf("%s: %+v", c.Name, c)
				}
			}
			if r.Failed() || r.Summary.OK != len(Names()) {
				t.Errorf("summary = %+v", r.Summary)
			}
		})
	}
}

func TestMacOSGates(t *testing.T) {
	tests := []struct {
		version, arch string
		status        Status
		message, fix  string
	}{
		{"12.7", "arm64", Fail, "vz driver needs macOS 13.0", "--vm-type qemu"},
		{"10.15", "amd64", Fail, "Virtualization.framework needs macOS 11.0", "brew install qemu"},
		{"14.5", "arm64", OK, "nested virtualization needs macOS 15.0 and an M3", ""},
		{"15.1", "arm64", OK, "nested virtualization if the chip is an M3", ""},
		{"15.1", "amd64", Warn, "crashes Linux 6.12", "15.5"},
		{"15.5", "amd64", OK, "vz ok", ""},
		{"", "arm64", Fail, "not understood", "report"},
	}
	for _, tt := range tests {
		expect(t, newFake(t, mac(tt.version, tt.arch)).result(t, "os"), tt.status, tt.message, tt.fix)
	}
}

// Inside a macOS VM on an M1 or M2 (GitHub's macOS runners) vz cannot run,
// though every version gate passes.
func TestMacWithoutVirtualization(t *testing.T) {
	fh := newFake(t, mac("15.5", "arm64"))
	fh.VirtualizationSupported = func() (bool, error) { return false, nil }
	expect(t, fh.result(t, "os"), Fail, "reports no hardware virtualization, so vz cannot start a VM", "run vmdock on the Mac itself")

	fh.Config.VMType = driver.TypeQEMU
	expect(t, fh.result(t, "os"), Warn, "no hardware virtualization", "--accel tcg")

	fh.VirtualizationSupported = func() (bool, error) { return true, nil }
	expect(t, fh.result(t, "os"), OK, "vz ok", "")
	// A build that cannot ask (no cgo) leaves it to the cgo row.
	fh.VirtualizationSupported = func() (bool, error) { return false, errors.New("vz: this build has no Virtualization.framework") }
	expect(t, fh.result(t, "os"), OK, "vz ok", "")
}

func TestMacOS12UsesQEMUSoVZProblemsOnlyWarn(t *testing.T) {
	fh := newFake(t, mac("12.7", "arm64"))
	fh.CGO = false
	if fh.Config.VMType != driver.TypeQEMU {
		t.Fatalf("default vmType on macOS 12 = %s", fh.Config.VMType)
	}
	expect(t, fh.result(t, "cgo"), Warn, "CGO_ENABLED=0", "make build")
	expect(t, fh.result(t, "rosetta"), Warn, "needs macOS 13", "update macOS")
}

func TestSignature(t *testing.T) {
	fh := newFake(t, mac("14.5", "arm64"))
	expect(t, fh.result(t, "signature"), OK, "signed with com.apple.security.virtualization", "")

	fh.outputs["codesign"] = "/usr/local/bin/vmdock: code object is not signed at all\n"
	expect(t, fh.result(t, "signature"), Fail, "not signed", "make build")
	expect(t, fh.result(t, "signature"), Fail, "", "codesign --entitlements hack/vz.entitlements --force -s - /usr/local/bin/vmdock")

	fh.outputs["codesign"] = "Executable=/usr/local/bin/vmdock\n"
	expect(t, fh.result(t, "signature"), Fail, "without the com.apple.security.virtualization entitlement", "make build")

	fh.Config.VMType = driver.TypeQEMU
	expect(t, fh.result(t, "signature"), Warn, "without the", "codesign")

	delete(fh.outputs, "codesign")
	expect(t, fh.result(t, "signature"), Warn, "cannot check", "codesign -d")

	expect(t, newFake(t, linux()).result(t, "signature"), OK, "not needed on linux", "")
}

func TestCgo(t *testing.T) {
	fh := newFake(t, mac("14.5", "arm64"))
	fh.CGO = false
	expect(t, fh.result(t, "cgo"), Fail, "CGO_ENABLED=0", "make build")
	fh.CGO = true
	expect(t, fh.result(t, "cgo"), OK, "with cgo", "")

	lx := newFake(t, linux())
	lx.CGO = false
	expect(t, lx.result(t, "cgo"), OK, "built without cgo; linux needs none", "")
}

func TestRosetta(t *testing.T) {
	fh := newFake(t, mac("14.5", "arm64"))
	expect(t, fh.result(t, "rosetta"), OK, "installed", "")
	delete(fh.files, rosettaRuntime)
	expect(t, fh.result(t, "rosetta"), Warn, "not installed", "softwareupdate --install-rosetta")
	fh.Config.VZRosetta = true
	expect(t, fh.result(t, "rosetta"), Warn, "vzRosetta: true", "softwareupdate --install-rosetta")

	expect(t, newFake(t, mac("14.5", "amd64")).result(t, "rosetta"), OK, "Intel", "")
	expect(t, newFake(t, linux()).result(t, "rosetta"), OK, "not on linux", "")
}

func TestQEMUAndAccel(t *testing.T) {
	fh := newFake(t, linux())
	expect(t, fh.result(t, "qemu"), OK, "QEMU 8.2.2", "")
	expect(t, fh.result(t, "accel"), OK, "kvm runs guests here (verdict cached", "")

	fh.qemu.Accel, fh.qemu.DeviceError, fh.qemu.Reason = "tcg", "open /dev/kvm: permission denied", "kvm unavailable: open /dev/kvm: permission denied"
	expect(t, fh.result(t, "accel"), Warn, "tcg: kvm unavailable", "usermod -aG kvm")

	fh.qemu.DeviceError, fh.qemu.Reason, fh.qemu.FromCache = "", "kvm unusable: QEMU exited: failed to set MSR 0x10a", false
	expect(t, fh.result(t, "accel"), Warn, "failed to set MSR 0x10a (probed now)", "nested virtualization")

	fh.Config.Arch = "arm64"
	expect(t, fh.result(t, "accel"), Warn, "an arm64 guest on an amd64 host", "--arch amd64")

	fh.qemu.TooOld, fh.qemu.Version = true, "5.2.0"
	expect(t, fh.result(t, "qemu"), Fail, "older than 6.2.0", "apt install qemu-system-x86")

	fh.qemuErr, fh.qemu = errors.New("qemu-system-x86_64 not found in PATH"), driver.AccelReport{}
	expect(t, fh.result(t, "qemu"), Fail, "not found", "apt install")
	expect(t, fh.result(t, "accel"), Warn, "no QEMU", "qemu row")

	// On a Mac that runs vz, QEMU is optional.
	m := newFake(t, mac("14.5", "arm64"))
	m.qemuErr = errors.New("qemu-system-aarch64 not found in PATH")
	expect(t, m.result(t, "qemu"), OK, "only --vm-type qemu needs it", "")
	expect(t, m.result(t, "accel"), OK, "vz", "")
}

func TestQEMUIsAskedOncePerReport(t *testing.T) {
	fh := newFake(t, linux())
	Run(context.Background(), fh.Facts)
	if fh.qemuRuns != 1 {
		t.Errorf("the QEMU probe ran %d times in one report; want 1", fh.qemuRuns)
	}
}

func TestVirtiofsd(t *testing.T) {
	fh := newFake(t, linux())
	fh.outputs["virtiofsd"] = "virtiofsd 1.10.1\n"
	expect(t, fh.result(t, "virtiofsd"), OK, "/usr/libexec/virtiofsd (virtiofsd 1.10.1)", "")
	fh.Host.Virtiofsd = ""
	fh.Config = config.Default(fh.Host)
	expect(t, fh.result(t, "virtiofsd"), Warn, "none found", "apt install virtiofsd")
	fh.VirtiofsdFound = "/usr/lib/qemu/virtiofsd"
	expect(t, fh.result(t, "virtiofsd"), Warn, "legacy C daemon", "as root")
	expect(t, newFake(t, mac("14.5", "arm64")).result(t, "virtiofsd"), OK, "vz shares folders", "")
}

func TestConfig(t *testing.T) {
	fh := newFake(t, linux())
	expect(t, fh.result(t, "config"), OK, "defaults: qemu, amd64 guest", "")
	fh.Config.VMType = driver.TypeVZ
	fh.ConfigSource = "saved config /x/vmdock.yaml"
	expect(t, fh.result(t, "config"), Fail, "saved config /x/vmdock.yaml is not accepted on this host: vmType", "vmdock start")
	fh.ConfigErr = errors.New("config /x/vmdock.yaml: invalid YAML")
	expect(t, fh.result(t, "config"), Fail, "invalid YAML", "correct the file")
}

func TestImage(t *testing.T) {
	fh := newFake(t, mac("14.5", "arm64"))
	expect(t, fh.result(t, "image"), OK, "cached, a start works offline", "")
	fh.image.Cached = false
	fh.image.Release = &images.ReleaseImage{Size: 1610612736}
	expect(t, fh.result(t, "image"), OK, "(1.5 GiB): the first start downloads it", "")
	fh.image = images.DefaultImage{Arch: "arm64", Source: images.SourceLocalBuild, Path: "/src/vmdock/bin/vmdock-arm64.tar.zst"}
	expect(t, fh.result(t, "image"), OK, "local build /src/vmdock/bin/vmdock-arm64.tar.zst: the first start copies it", "")
	fh.imgErr = errors.New("no vmdock image for arm64: run `make image`, `vmdock image import FILE`, or set VMDOCK_IMAGE_BASE_URL")
	expect(t, fh.result(t, "image"), Fail, "VMDOCK_IMAGE_BASE_URL", "ways out")
	fh.Config.Image = "debian-13"
	expect(t, fh.result(t, "image"), OK, `names image "debian-13"`, "")
}

func TestSocketPaths(t *testing.T) {
	// 104 bytes is too long on a Mac (103 usable), fine on Linux (107).
	home := "/" + strings.Repeat("h", 104-len("/default/containerd.sock")-1)
	for _, tt := range []struct {
		host   config.Host
		status Status
	}{{mac("14.5", "arm64"), Fail}, {linux(), OK}} {
		fh := newFake(t, tt.host)
		fh.Instance, _ = store.Open(home, "default")
		fh.Config.Runtime = config.RuntimeContainerd
		fh.Config.VMType = driver.TypeVZ
		r := fh.result(t, "sockets")
		if r.Status != tt.status || !strings.Contains(r.Message, "containerd.sock") {
			t.Errorf("%s: %+v; want %s naming containerd.sock", tt.host.OS, r, tt.status)
		}
		if r.Status == Fail && !strings.Contains(r.Fix, "VMDOCK_HOME") {
			t.Errorf("fix = %q", r.Fix)
		}
	}
	// The same limits as `vmdock start`: QEMU's sockets on Linux get 107.
	fh := newFake(t, linux())
	fh.Instance, _ = store.Open("/"+strings.Repeat("q", 108-len("/default/virtiofs-0.sock")-1), "default")
	expect(t, fh.result(t, "sockets"), Fail, "virtiofs-0.sock is 108 bytes, longer than the 107", "VMDOCK_HOME")
	fh.Instance, _ = store.Open("/home/ann/.vmdock", "default")
	expect(t, fh.result(t, "sockets"), OK, "of 107 bytes", "")
}

func TestDisk(t *testing.T) {
	fh := newFake(t, linux())
	for _, tt := range []struct {
		free   uint64
		status Status
	}{{100 << 30, OK}, {3 << 30, Warn}, {1 << 30, Fail}} {
		fh.free = tt.free
		expect(t, fh.result(t, "disk"), tt.status, "image cache", "")
	}
	fh.free = 100 << 30
	fh.FreeBytes = func(p string) (uint64, error) { return 0, errors.New("statfs " + p + ": permission denied") }
	expect(t, fh.result(t, "disk"), Warn, "permission denied", "keep")
}

func TestDocker(t *testing.T) {
	fh := newFake(t, mac("14.5", "arm64"))
	expect(t, fh.result(t, "docker"), OK, "Docker version 27.3.1", "")
	delete(fh.outputs, "docker")
	expect(t, fh.result(t, "docker"), Warn, "no docker CLI", "brew install docker")
	fh.Config.Runtime = config.RuntimeContainerd
	expect(t, fh.result(t, "docker"), OK, "containerd", "")
	expect(t, fh.result(t, "docker-context"), OK, "containerd", "")
}

func TestDockerCredentials(t *testing.T) {
	const home = "/Users/ann/.docker/config.json"
	tests := []struct {
		name      string
		os        string
		dockerCfg string // $DOCKER_CONFIG
		file      string // where config.json is
		config    string
		helpers   []string // docker-credential-* programs on PATH
		status    Status
		message   string
		fix       string
	}{
		{name: "no config.json", status: OK, message: "no credential helper configured"},
		{name: "no helper named", file: home, config: `{"auths":{}}`, status: OK, message: "every credential helper"},
		{name: "desktop left behind", file: home, config: `{"auths":{},"credsStore":"desktop"}`, status: Fail,
			message: `credsStore "desktop", but docker-credential-desktop is not on PATH`, fix: `remove "credsStore" from ` + home},
		{name: "desktop still installed", file: home, config: `{"credsStore":"desktop"}`, helpers: []string{"docker-credential-desktop"},
			status: OK, message: "credsStore desktop (docker-credential-desktop found)"},
		{name: "osxkeychain on a Mac", os: osDarwin, file: home, config: `{"credsStore":"osxkeychain"}`, status: Fail,
			message: "docker-credential-osxkeychain is not on PATH", fix: "brew install docker-credential-helper"},
		{name: "osxkeychain on Linux", os: osLinux, file: "/home/ann/.docker/config.json", config: `{"credsStore":"osxkeychain"}`, status: Fail,
			message: "docker-credential-osxkeychain is not on PATH", fix: "install docker-credential-osxkeychain"},
		{name: "DOCKER_CONFIG is honoured", dockerCfg: "/tmp/dc", file: "/tmp/dc/config.json", config: `{"credsStore":"desktop"}`, status: Fail,
			message: "/tmp/dc/config.json: credsStore", fix: "remove \"credsStore\" from /tmp/dc/config.json"},
		{name: "DOCKER_CONFIG without a file ignores ~/.docker", dockerCfg: "/tmp/dc", file: home, config: `{"credsStore":"desktop"}`, status: OK,
			message: "no /tmp/dc/config.json"},
		{name: "credHelpers with a missing helper", file: home, config: `{"credHelpers":{"gcr.io":"gcloud","ghcr.io":"gh","quay.io":"gcloud"}}`,
			helpers: []string{"docker-credential-gh"}, status: Warn,
			message: "credHelpers for gcr.io, quay.io name docker-credential-gcloud", fix: "remove the credHelpers entries for gcr.io, quay.io"},
		{name: "credHelpers all found", file: home, config: `{"credHelpers":{"ghcr.io":"gh"}}`, helpers: []string{"docker-credential-gh"},
			status: OK, message: "every credential helper"},
		{name: "not JSON", file: home, config: `{"credsStore":`, status: Warn, message: "not valid JSON", fix: "fix or remove"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mac("14.5", "arm64")
			if tt.os == osLinux {
				h = linux()
			}
			fh := newFake(t, h)
			if tt.os == osLinux {
				fh.env["HOME"] = "/home/ann"
			}
			if tt.dockerCfg != "" {
				fh.env["DOCKER_CONFIG"] = tt.dockerCfg
			}
			if tt.file != "" {
				fh.contents[tt.file] = tt.config
			}
			for _, p := range tt.helpers {
				fh.outputs[p] = ""
			}
			expect(t, fh.result(t, "docker-credentials"), tt.status, tt.message, tt.fix)
		})
	}
	fh := newFake(t, linux())
	fh.contents["/Users/ann/.docker/config.json"] = `{"credsStore":"desktop"}`
	fh.Config.Runtime = config.RuntimeContainerd
	expect(t, fh.result(t, "docker-credentials"), OK, "containerd", "")
}

func TestDockerContext(t *testing.T) {
	fh := newFake(t, linux())
	expect(t, fh.result(t, "docker-context"), OK, "vmdock (this instance's)", "")
	fh.DockerContext = func() string { return "desktop-linux" }
	expect(t, fh.result(t, "docker-context"), OK, "`vmdock start` switches it to vmdock", "")
	fh.status = &instance.LiveStatus{State: instance.StateRunning, PID: 42}
	expect(t, fh.result(t, "docker-context"), Warn, "another engine", "docker context use vmdock")
	fh.env["DOCKER_CONTEXT"] = "colima"
	expect(t, fh.result(t, "docker-context"), Warn, "DOCKER_CONTEXT=colima", "unset DOCKER_CONTEXT")
	fh.env["DOCKER_HOST"] = "tcp://10.0.0.1:2375"
	expect(t, fh.result(t, "docker-context"), Warn, "DOCKER_HOST=tcp://10.0.0.1:2375", "unset DOCKER_HOST")
	fh.env["DOCKER_HOST"] = "unix://" + fh.Instance.DockerSocketPath()
	expect(t, fh.result(t, "docker-context"), OK, "this instance's socket", "")
}

func TestInstance(t *testing.T) {
	fh := newFake(t, linux())
	expect(t, fh.result(t, "instance"), OK, "not created yet", "")
	expect(t, fh.result(t, "instance"), OK, "its next start's network: gvisor (user)", "")
	fh.status = &instance.LiveStatus{State: instance.StateRunning, PID: 42}
	expect(t, fh.result(t, "instance"), OK, "Running (host agent pid 42)", "")
	fh.status.HostAgent = &control.Status{Network: &control.NetworkStatus{Stack: "slirp", Mode: "isolated"}}
	expect(t, fh.result(t, "instance"), OK, "Running (host agent pid 42); network slirp (isolated)", "")
	fh.status = &instance.LiveStatus{State: instance.StateStopped}
	fh.Config.Network.Stack, fh.Config.Network.Mode = "gvisor", "user"
	expect(t, fh.result(t, "instance"), OK, "its next start's network: gvisor (user)", "")
	fh.status = &instance.LiveStatus{State: instance.StateBroken, Reason: "the VM exited:\nkernel panic"}
	expect(t, fh.result(t, "instance"), Fail, "Broken: the VM exited:; kernel panic", "vmdock logs hostagent -p default")
}

// A running guest with no resolver to forward to fails: every lookup of an
// outside name in its containers does.
func TestGuestDNS(t *testing.T) {
	fh := newFake(t, linux())
	expect(t, fh.result(t, "guest-dns"), OK, "not running", "")
	fh.status = &instance.LiveStatus{State: instance.StateRunning, PID: 42, HostAgent: &control.Status{
		GuestDNS: &control.GuestDNSStatus{Upstreams: []string{}},
	}}
	expect(t, fh.result(t, "guest-dns"), Fail, "the guest's DNS has no upstream", "network.dns")
	fh.status.HostAgent.GuestDNS.Upstreams = []string{"10.0.2.3:53"}
	expect(t, fh.result(t, "guest-dns"), OK, "resolves through 10.0.2.3:53", "")
	fh.status.HostAgent.GuestDNS = &control.GuestDNSStatus{Upstreams: []string{}, Error: "context deadline exceeded"}
	expect(t, fh.result(t, "guest-dns"), Warn, "did not say", "vmdock logs guest")
}

func TestReportOutput(t *testing.T) {
	fh := newFake(t, mac("12.7", "arm64"))
	fh.outputs["codesign"] = "code object is not signed at all"
	r := Run(context.Background(), fh.Facts)
	r.Version = "v0.1.0"
	if !r.Failed() || r.Summary.OK+r.Summary.Warn+r.Summary.Fail != len(Names()) {
		t.Fatalf("summary = %+v", r.Summary)
	}

	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(text.String(), "\n"), "\n")
	if len(lines) != len(Names())+2 {
		t.Fatalf("text report has %d lines; want one per check, a blank and the summary:\n%s", len(lines), text.String())
	}
	col := -1
	for i, name := range Names() {
		if !strings.HasPrefix(lines[i], name+" ") {
			t.Errorf("line %d = %q; want the %s check", i, lines[i], name)
		}
		at := strings.Index(lines[i], " "+string(r.Checks[i].Status)+" ")
		if col < 0 {
			col = at
		}
		if at < 0 || at != col {
			t.Errorf("line %d = %q: status not in the column of line 0", i, lines[i])
		}
	}
	if want := "vmdock v0.1.0: "; !strings.HasPrefix(lines[len(lines)-1], want) || !strings.Contains(text.String(), "-> upgrade") && !strings.Contains(text.String(), "-> update macOS") {
		t.Errorf("text report:\n%s", text.String())
	}

	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Version string `json:"version"`
		Checks  []struct {
			Name, Status, Message, Fix string
		} `json:"checks"`
		Summary map[string]int `json:"summary"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Checks) != len(Names()) || back.Summary["fail"] != r.Summary.Fail || back.Checks[0].Fix == "" {
		t.Errorf("JSON report = %s", js.String())
	}
}

func TestDetectDescribesThisHost(t *testing.T) {
	t.Setenv(store.HomeEnv, t.TempDir())
	t.Setenv("VMDOCK_CACHE", t.TempDir())
	inst, err := store.Open(os.Getenv(store.HomeEnv), "default")
	if err != nil {
		t.Fatal(err)
	}
	f := Detect(config.Host{OS: "linux", Arch: "amd64"}, inst)
	if f.Kernel == "" || f.SunPathMax < 104 || f.Executable == "" || f.CacheDir == "" {
		t.Errorf("Detect = %+v", f)
	}
	if created, _ := f.InstanceStatus(context.Background()); created {
		t.Error("a fresh home has a created instance")
	}
}

func TestRemote(t *testing.T) {
	fh := newFake(t, linux())
	expect(t, fh.result(t, "remote"), OK, "not a remote instance", "")
	fh.Config.Remote = &config.Remote{URL: "ssh://me@build", Socket: "/var/run/docker.sock"}
	var asked remote.Server
	fh.ProbeRemote = func(s remote.Server, _ context.Context) (remote.Facts, error) {
		asked = s
		return remote.Facts{Arch: "amd64"}, nil
	}
	expect(t, fh.result(t, "remote"), OK, "ssh://me@build: ssh answers, /var/run/docker.sock is usable, a linux/amd64 server", "")
	if asked.Target.User != "me" || asked.Target.Host != "build" {
		t.Errorf("probed %+v; want me@build", asked.Target)
	}
	fh.qemuErr, fh.qemuRuns = errors.New("no qemu-system-x86_64"), 0
	fh.free = 0
	expect(t, fh.result(t, "qemu"), OK, "a remote instance runs no VM", "")
	expect(t, fh.result(t, "disk"), OK, "a remote instance runs no VM", "")
	if fh.qemuRuns != 0 {
		t.Errorf("doctor asked for QEMU %d times for a remote instance", fh.qemuRuns)
	}
	fh.ProbeRemote = func(remote.Server, context.Context) (remote.Facts, error) {
		return remote.Facts{}, errors.New("ssh://me@build: the SSH user may not use /var/run/docker.sock; add it to the docker group")
	}
	expect(t, fh.result(t, "remote"), Fail, "add it to the docker group", "docs/remote.md")
	fh.Config.Remote.URL = "http://build"
	expect(t, fh.result(t, "remote"), Fail, `scheme "http" is not supported`, "remote.url")
}

// The watchdog's view of a running instance: a path it could not mend
// fails, and healthy paths say what it last mended.
func TestNetworkPaths(t *testing.T) {
	fh := newFake(t, linux())
	expect(t, fh.result(t, "network-paths"), OK, "not running", "")
	fh.status = &instance.LiveStatus{State: instance.StateRunning, PID: 42, HostAgent: &control.Status{
		Watchdog: &control.WatchdogStatus{Paths: []control.PathHealth{
			{Path: "ports", OK: true}, {Path: "dns", Problem: "the stack's DNS server stopped"},
		}},
	}}
	expect(t, fh.result(t, "network-paths"), Fail, "dns: the stack's DNS server stopped", "vmdock logs hostagent")
	fh.status.HostAgent.Watchdog.Paths[1] = control.PathHealth{Path: "dns", OK: true}
	fh.status.HostAgent.Watchdog.LastRepair = &control.WatchdogRepair{At: "2026-12-07T20:14:33Z", Path: "ports", What: "tcp 127.0.0.1:8080 bound again"}
	expect(t, fh.result(t, "network-paths"), OK, "last repair 2026-12-07T20:14:33Z ports: tcp 127.0.0.1:8080 bound again", "")
}
