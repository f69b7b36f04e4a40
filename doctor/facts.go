package doctor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vmdock/vmdock/dockerhost/dockerctx"
	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/internal/diskfree"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/remote"
	"github.com/vmdock/vmdock/vm/store"
)

// Facts is everything the checks know about the host: values detected up
// front, and probes the checks call. Tests fill it by hand to describe any
// host; Detect fills it for this one.
type Facts struct {
	Host       config.Host // as main detected it: OS, arch, macOS version, QEMU's accelerator, virtiofsd
	CGO        bool        // this binary was built with cgo
	Kernel     string      // kernel release (uname -r)
	Executable string      // this binary, whose signature vz checks
	SunPathMax int         // bytes in a unix socket address's path, with its NUL
	// VirtiofsdFound is the virtiofs daemon found, even one this user
	// cannot run (Host.Virtiofsd is only a usable one). Like QEMU, it
	// comes from the QEMU driver, which the caller links, not doctor.
	VirtiofsdFound string

	Instance *store.Instance
	CacheDir string // the image cache; empty: none could be named
	// Config is what the instance's next start runs: its saved config, or
	// for a new instance the template or the defaults (ConfigSource says
	// which). ConfigErr is why that could not be read; Config then holds
	// the defaults.
	Config       config.Config
	ConfigSource string
	ConfigErr    error

	// Run runs a program and returns what it printed on stdout and stderr.
	Run      func(ctx context.Context, name string, args ...string) (string, error)
	LookPath func(file string) (string, error)
	Exists   func(path string) bool
	Getenv   func(key string) string
	ReadFile func(path string) ([]byte, error)
	// QEMU reports the qemu-system-* binary and the accelerator a start
	// of an arch guest would use (it may boot a probe).
	QEMU func(ctx context.Context, arch string) (driver.AccelReport, error)
	// VirtualizationSupported is Virtualization.framework's answer to
	// whether this Mac runs VMs at all; nil or an error: unknown (a
	// build without vz). Like QEMU, the caller sets it from the vz driver.
	VirtualizationSupported func() (bool, error)
	// DockerContext is the docker CLI's current context.
	DockerContext func() string
	// DefaultImage is the image a start without --image would use.
	DefaultImage func(ctx context.Context, arch, baseURL string) (images.DefaultImage, error)
	// ProbeRemote asks a remote instance's server over ssh for its arch
	// and its engine's socket (remote.Server.Probe).
	ProbeRemote func(remote.Server, context.Context) (remote.Facts, error)
	// FreeBytes is the space an unprivileged user may fill on the file
	// system that holds (or would hold) path.
	FreeBytes func(path string) (uint64, error)
	// InstanceStatus is the live state of Instance; created is false when
	// it has no config yet.
	InstanceStatus func(ctx context.Context) (created bool, st instance.LiveStatus)
}

// Detect describes this host for the instance inst, as main detected it
// (h). The caller sets the Config fields, as which config a start would
// use is the command line's business, and the drivers' facts (QEMU,
// VirtiofsdFound, VirtualizationSupported): below the command line only
// the host agent links the drivers.
func Detect(h config.Host, inst *store.Instance) Facts {
	f := Facts{
		Host:       h,
		CGO:        cgoEnabled,
		Kernel:     kernelRelease(),
		SunPathMax: sunPathMax,
		Instance:   inst,
		Run:        runProgram,
		LookPath:   exec.LookPath,
		Exists: func(p string) bool {
			_, err := os.Stat(p)
			return err == nil
		},
		Getenv:        os.Getenv,
		ReadFile:      os.ReadFile,
		DockerContext: dockerctx.Current,
		DefaultImage: func(ctx context.Context, arch, baseURL string) (images.DefaultImage, error) {
			return images.ResolveDefault(ctx, arch, images.Options{BaseURL: baseURL})
		},
		FreeBytes:   diskfree.Bytes,
		ProbeRemote: remote.Server.Probe,
		InstanceStatus: func(ctx context.Context) (bool, instance.LiveStatus) {
			if !inst.Exists() {
				return false, instance.LiveStatus{}
			}
			return true, instance.Status(ctx, inst)
		},
	}
	f.Executable, _ = os.Executable()
	if dir, err := images.DefaultCacheDir(); err == nil {
		f.CacheDir = dir
	}
	return f
}

// runTimeout bounds one program a check runs (codesign, docker --version):
// doctor must answer even when one of them hangs.
const runTimeout = 10 * time.Second

func runProgram(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("run %s: %w", name, err)
	}
	return string(out), nil
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// memo makes each probe that several checks share run once per report:
// the accelerator probe boots QEMU, the instance status asks the host agent.
func (f Facts) memo() Facts {
	if q := f.QEMU; q != nil {
		var mu sync.Mutex
		type answer struct {
			r   driver.AccelReport
			err error
		}
		seen := map[string]answer{}
		f.QEMU = func(ctx context.Context, arch string) (driver.AccelReport, error) {
			mu.Lock()
			defer mu.Unlock()
			a, ok := seen[arch]
			if !ok {
				a.r, a.err = q(ctx, arch)
				seen[arch] = a
			}
			return a.r, a.err
		}
	}
	if s := f.InstanceStatus; s != nil {
		var once sync.Once
		var created bool
		var st instance.LiveStatus
		f.InstanceStatus = func(ctx context.Context) (bool, instance.LiveStatus) {
			once.Do(func() { created, st = s(ctx) })
			return created, st
		}
	}
	return f
}

// firstLine is a program's answer without its details.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
