package bench

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vmdock/vmdock/dockerhost/engineapi"
)

// fileServerPort is busybox httpd's port in its container; the engine
// publishes it on a port of its choosing.
const fileServerPort = 8080

// fileServer is the remote section's container on the server: busybox
// httpd serving /big (random bytes, so no compression on the way helps)
// and /small (a token naming this run's container).
type fileServer struct {
	api       *engineapi.Client
	image, id string
	token     string
	port      int // the published port on the server
}

// startFileServer imports busybox as an image through the engine on sock
// and runs the file server from it, /big being n bytes.
func startFileServer(ctx context.Context, sock, busybox string, n int64) (*fileServer, error) {
	s := &fileServer{api: engineapi.Unix(sock)}
	var v struct{ Os, Arch string }
	if err := s.api.Get(ctx, "/version", nil, &v); err != nil {
		return nil, fmt.Errorf("docker %w", err)
	}
	bin, err := staticBusybox(busybox, v.Arch)
	if err != nil {
		return nil, err
	}
	if err := s.importImage(ctx, bin); err != nil {
		return nil, err
	}
	tok := make([]byte, 8)
	rand.Read(tok)
	s.token = hex.EncodeToString(tok)
	if err := s.run(ctx, n); err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// importImage makes the image as `docker import` does: one layer holding
// busybox, never a pull.
func (s *fileServer) importImage(ctx context.Context, bin []byte) error {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, e := range []struct {
		name string
		mode int64
		data []byte
	}{{"bin/", 0o755, nil}, {"bin/busybox", 0o755, bin}, {"www/", 0o755, nil}} {
		h := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.data)), Typeflag: tar.TypeReg}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	sum := sha256.Sum256(bin)
	repo, tag := "vmdock-bench-busybox", hex.EncodeToString(sum[:6])
	q := url.Values{"fromSrc": {"-"}, "repo": {repo}, "tag": {tag}}
	resp, err := s.api.Do(ctx, http.MethodPost, "/images/create", q, &layer, "application/x-tar")
	if err != nil {
		return fmt.Errorf("docker import busybox: %w", err)
	}
	defer resp.Body.Close()
	if err := progressError(resp.Body); err != nil {
		return fmt.Errorf("docker import busybox: %w", err)
	}
	s.image = repo + ":" + tag
	return nil
}

// progressError is the error an engine's JSON progress stream ends with,
// if any.
func progressError(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct{ Error string }
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.Error != "" {
			return errors.New(m.Error)
		}
	}
	return sc.Err()
}

// fileServerScript writes /big ($0 MiB of random bytes) and /small (the
// token, $1), then serves them on port $2; every command is busybox's
// own, as the image holds nothing else.
const fileServerScript = `set -e
/bin/busybox dd if=/dev/urandom of=/www/big bs=1048576 count="$0" 2>/dev/null
echo "$1" >/www/small
exec /bin/busybox httpd -f -p "$2" -h /www`

// run creates and starts the container, its port published on a free
// port of the server, and finds that port.
func (s *fileServer) run(ctx context.Context, n int64) error {
	p := fmt.Sprintf("%d/tcp", fileServerPort)
	body := map[string]any{
		"Image":        s.image,
		"Cmd":          []string{"/bin/busybox", "sh", "-c", fileServerScript, strconv.FormatInt(n>>20, 10), s.token, strconv.Itoa(fileServerPort)},
		"ExposedPorts": map[string]any{p: map[string]any{}},
		"Labels":       map[string]string{"vmdock.bench": "remote"},
		"HostConfig":   map[string]any{"PortBindings": map[string]any{p: []map[string]string{{"HostPort": ""}}}},
	}
	var created struct{ Id string } //nolint:revive // the API's spelling
	if err := s.api.Post(ctx, "/containers/create", url.Values{"name": {"vmdock-bench-" + s.token}}, body, &created); err != nil {
		return fmt.Errorf("docker create the file server: %w", err)
	}
	s.id = created.Id
	if err := s.api.Post(ctx, "/containers/"+url.PathEscape(s.id)+"/start", nil, nil, nil); err != nil {
		return fmt.Errorf("docker start the file server: %w", err)
	}
	var insp struct {
		NetworkSettings struct {
			Ports map[string][]struct{ HostPort string }
		}
	}
	if err := s.api.Get(ctx, "/containers/"+url.PathEscape(s.id)+"/json", nil, &insp); err != nil {
		return fmt.Errorf("docker inspect the file server: %w", err)
	}
	for _, b := range insp.NetworkSettings.Ports[p] {
		if port, err := strconv.Atoi(b.HostPort); err == nil && port > 0 {
			s.port = port
			return nil
		}
	}
	return fmt.Errorf("the engine published no port for the file server's %s", p)
}

// wait waits until the server at addr serves this run's token.
func (s *fileServer) wait(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var body bytes.Buffer
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _, _, err := fetch(cctx, addr, "/small", &body)
		cancel()
		if err == nil && strings.TrimSpace(body.String()) == s.token {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("it serves another file than this run's (%q)", strings.TrimSpace(body.String()))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: no answer within %s: %w", addr, timeout, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// remove takes the container and the image off the server.
func (s *fileServer) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.id != "" {
		_ = s.api.Delete(ctx, "/containers/"+url.PathEscape(s.id), url.Values{"force": {"1"}})
	}
	if s.image != "" {
		_ = s.api.Delete(ctx, "/images/"+url.PathEscape(s.image), nil)
	}
	s.api.CloseIdleConnections()
}

// elfMachines are the ELF machines of the engine's arch names.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// staticBusybox reads the busybox binary at path and checks it runs in an
// empty image on an engine of arch: a static Linux ELF of that arch.
func staticBusybox(path, arch string) ([]byte, error) {
	const how = "apt-get install busybox-static gives /bin/busybox; else give one with --busybox"
	if path == "" {
		return nil, fmt.Errorf("no static busybox for the server's file server (%s)", how)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("busybox: %w (%s)", err, how)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return nil, fmt.Errorf("busybox %s is not a Linux binary (%s)", path, how)
	}
	want, ok := elfMachines[arch]
	if !ok {
		return nil, fmt.Errorf("the server's engine runs on %q; accepted: amd64 or arm64", arch)
	}
	if f.Machine != want {
		return nil, fmt.Errorf("busybox %s is for %s, the server's engine runs %s; give a static busybox for %s with --busybox", path, f.Machine, arch, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("busybox %s is dynamically linked and cannot run in an empty image (%s)", path, how)
		}
	}
	return bin, nil
}

// DescribeServer fills m's guest fields with the server's, as its engine
// on sock reports them: CPUs, memory and kernel.
func DescribeServer(ctx context.Context, sock string, m *Machine) error {
	var info struct {
		NCPU          int
		MemTotal      int64
		KernelVersion string
	}
	api := engineapi.Unix(sock)
	defer api.CloseIdleConnections()
	if err := api.Get(ctx, "/info", nil, &info); err != nil {
		return fmt.Errorf("docker %w", err)
	}
	m.GuestCPUs, m.GuestMemGiB, m.GuestKernel = info.NCPU, float64(info.MemTotal)/(1<<30), info.KernelVersion
	return nil
}
