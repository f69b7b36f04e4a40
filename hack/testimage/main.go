// Command testimage writes the vmdock-test:latest container image as a
// `docker load` tarball, so the end-to-end tests never pull from a
// registry. The image holds a static busybox (sh, echo, cat, ls, nc, wget,
// sleep, ...) and /echo-server (see ./echoserver), its default command.
//
//	go run ./hack/testimage --arch amd64 --out vmdock-test.tar
package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

const echoServerPkg = "github.com/vmdock/vmdock/hack/testimage/echoserver"

// applets are the busybox links the tests use (plus a few harmless extras).
var applets = []string{"sh", "echo", "cat", "ls", "nc", "wget", "sleep", "true", "env", "ps", "uname",
	"nslookup", "sha256sum", "seq", "xargs", "wc", "timeout", "grep"}

var machines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

func main() {
	arch := flag.String("arch", runtime.GOARCH, "image architecture: amd64 or arm64")
	out := flag.String("out", "", "output tarball (docker save format)")
	busybox := flag.String("busybox", "", "static busybox binary for --arch (default: /bin/busybox when --arch is the host's, else busybox-static from apt)")
	busyboxDeb := flag.String("busybox-deb", "", "busybox-static .deb for --arch to take /bin/busybox from")
	flag.Parse()

	if err := run(*arch, *out, *busybox, *busyboxDeb); err != nil {
		fmt.Fprintln(os.Stderr, "testimage:", err)
		os.Exit(1)
	}
}

func run(arch, out, busybox, busyboxDeb string) error {
	if _, ok := machines[arch]; !ok {
		return fmt.Errorf("bad --arch %q (accepted: amd64, arm64)", arch)
	}
	if out == "" {
		return errors.New("missing --out FILE")
	}
	tmp, err := os.MkdirTemp("", "vmdock-testimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	bbPath, err := busyboxPath(arch, busybox, busyboxDeb, tmp)
	if err != nil {
		return err
	}
	bb, err := readStaticELF(bbPath, arch)
	if err != nil {
		return err
	}
	srvPath := filepath.Join(tmp, "echo-server")
	if err := buildEchoServer(arch, srvPath); err != nil {
		return err
	}
	srv, err := readStaticELF(srvPath, arch)
	if err != nil {
		return err
	}

	layer, err := buildLayer(layerEntries(bb, srv))
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	img := image{
		Repo:  "vmdock-test",
		Tag:   "latest",
		Arch:  arch,
		Cmd:   []string{"/echo-server"},
		Env:   []string{"PATH=/bin"},
		Ports: []string{"80/tcp", "81/udp", "82/tcp"},
		Layer: layer,
	}
	if err := writeSave(&buf, img); err != nil {
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	slog.Info("wrote image", "ref", "vmdock-test:latest", "arch", arch, "file", out, "bytes", buf.Len())
	return nil
}

func layerEntries(busybox, echoServer []byte) []entry {
	es := []entry{
		{Name: "bin", Mode: 0o755, Dir: true},
		{Name: "bin/busybox", Mode: 0o755, Data: busybox},
		{Name: "echo-server", Mode: 0o755, Data: echoServer},
		{Name: "tmp", Mode: 0o1777, Dir: true},
	}
	for _, a := range applets {
		es = append(es, entry{Name: "bin/" + a, Mode: 0o777, Link: "busybox"})
	}
	return es
}

// busyboxPath finds a busybox for arch: an explicit binary, one inside a
// .deb, or the host's own when the arch matches.
func busyboxPath(arch, busybox, deb, tmp string) (string, error) {
	switch {
	case busybox != "":
		return busybox, nil
	case deb == "" && arch == runtime.GOARCH:
		return "/bin/busybox", nil
	case deb == "":
		var err error
		if deb, err = downloadBusyboxDeb(arch, tmp); err != nil {
			return "", fmt.Errorf("no busybox for --arch %s: pass --busybox FILE or --busybox-deb FILE: %w", arch, err)
		}
		fallthrough
	default:
		dir := filepath.Join(tmp, "deb")
		if out, err := exec.Command("dpkg-deb", "-x", deb, dir).CombinedOutput(); err != nil {
			return "", fmt.Errorf("unpack %s: %v: %s", deb, err, out)
		}
		for _, p := range []string{"bin/busybox", "usr/bin/busybox"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
				return filepath.Join(dir, p), nil
			}
		}
		return "", fmt.Errorf("no bin/busybox in %s", deb)
	}
}

// downloadBusyboxDeb fetches busybox-static for a foreign arch with the
// host's apt sources, keeping package lists in tmp so the host's apt state
// (and its dpkg architectures) stay untouched.
func downloadBusyboxDeb(arch, tmp string) (string, error) {
	state := filepath.Join(tmp, "apt")
	dl := filepath.Join(tmp, "dl")
	for _, d := range []string{"lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(state, d), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(dl, 0o755); err != nil {
		return "", err
	}
	opts := []string{
		"-o", "APT::Architectures::=" + arch,
		"-o", "APT::Architecture=" + arch,
		"-o", "Dir::State::Lists=" + filepath.Join(state, "lists"),
		"-o", "Dir::Cache=" + filepath.Join(state, "cache"),
		"-o", "Dir::State::status=/dev/null",
		"-o", "APT::Sandbox::User=root",
	}
	for _, args := range [][]string{{"update", "-qq"}, {"download", "-qq", "busybox-static:" + arch}} {
		cmd := exec.Command("apt-get", append(opts, args...)...)
		cmd.Dir = dl
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get %s: %v: %s", args[0], err, bytes.TrimSpace(out))
		}
	}
	debs, _ := filepath.Glob(filepath.Join(dl, "busybox-static_*_"+arch+".deb"))
	if len(debs) != 1 {
		return "", fmt.Errorf("apt-get download busybox-static:%s gave %d .deb files, want 1", arch, len(debs))
	}
	return debs[0], nil
}

// readStaticELF reads a binary that must run in an empty container: built
// for arch and with no dynamic loader.
func readStaticELF(p, arch string) ([]byte, error) {
	f, err := elf.Open(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	defer f.Close()
	if f.Machine != machines[arch] {
		return nil, fmt.Errorf("%s is built for %v, want %v (%s)", p, f.Machine, machines[arch], arch)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is dynamically linked; need a static binary (busybox-static)", p)
		}
	}
	return os.ReadFile(p)
}

func buildEchoServer(arch, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", out, echoServerPkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build echo-server for %s: %w", arch, err)
	}
	return nil
}
