package bench

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmdock/vmdock/internal/connpipe"
	"github.com/vmdock/vmdock/internal/shortdir"
)

// The rows read as the other sections': the baseline (the first variant
// with samples) first in each metric, and every ratio oriented so that
// above 1x is faster than it: baseline/value for a latency, value/baseline
// for a throughput.
func TestRemoteRowsAreRatiosAgainstTheBaseline(t *testing.T) {
	msd := func(vs ...float64) []time.Duration {
		var out []time.Duration
		for _, v := range vs {
			out = append(out, time.Duration(v*float64(time.Millisecond)))
		}
		return out
	}
	rep := &Report{}
	lat := map[string][]time.Duration{
		remoteSSH:     msd(1, 1, 1, 1, 1, 1, 1, 1, 1, 4), // p50 1 ms, p90 1 ms
		remoteSession: msd(2, 2, 2, 2, 2, 2, 2, 2, 2, 8), // p50 2 ms, p90 2 ms
	}
	// A variant with no samples has no row; the next one is the baseline.
	for _, res := range latencyRows(SectionRemote, "docker GET /_ping", []string{remoteDirect, remoteSSH, remoteSession}, lat) {
		rep.Add(res)
	}
	stream := map[string][]float64{remoteDirect: {100, 400, 300}, remoteSession: {50, 75, 150}}
	for _, res := range throughputRows(SectionRemote, "published port download 64MB", []string{remoteDirect, remoteSSH, remoteSession}, stream) {
		rep.Add(res)
	}
	rep.ComputeRatios()
	var got []string
	for _, r := range rep.Results {
		got = append(got, fmt.Sprintf("%s | %s | %g %s | %s | %.2f | %s", r.Metric, r.Variant, r.Value, r.Unit, r.Better, r.Ratio, r.Note))
	}
	want := []string{
		"docker GET /_ping p50 | OpenSSH forward (ssh -L) | 1 ms | lower | 1.00 | 10 samples",
		"docker GET /_ping p50 | vmdock session | 2 ms | lower | 0.50 | 10 samples, +1.00 ms",
		"docker GET /_ping p90 | OpenSSH forward (ssh -L) | 1 ms | lower | 1.00 | 10 samples",
		"docker GET /_ping p90 | vmdock session | 2 ms | lower | 0.50 | 10 samples, +1.00 ms",
		"published port download 64MB | server address, no ssh | 300 MB/s | higher | 1.00 | median of 3 rounds",
		"published port download 64MB | vmdock session | 75 MB/s | higher | 0.25 | median of 3 rounds",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !rep.Results[0].Baseline || !rep.Results[4].Baseline || rep.Results[1].Baseline {
		t.Errorf("baselines %+v", rep.Results)
	}
}

// A remote instance runs the remote section only and a VM instance all
// but it; what an instance cannot run is one line, not one per section.
func TestSplitSectionsByInstanceKind(t *testing.T) {
	re := &RemoteEnv{Server: "ssh://me@build"}
	run, skip := splitSections([]string{"disk", "tree", SectionRemote}, re)
	if !slices.Equal(run, []string{SectionRemote}) || skip != "disk, tree: a remote instance runs no VM (its engine is the server's, ssh://me@build); --sections remote measures it" {
		t.Errorf("remote instance: run %q, skip %q", run, skip)
	}
	run, skip = splitSections([]string{"api", SectionRemote}, nil)
	if !slices.Equal(run, []string{"api"}) || skip != "remote: needs a remote instance (vmdock start --remote ssh://HOST); this one runs a VM" {
		t.Errorf("VM instance: run %q, skip %q", run, skip)
	}
	if run, skip := splitSections(DefaultSections(false), nil); len(run) != len(Sections)-1 || skip != "" {
		t.Errorf("VM instance, default sections: run %q, skip %q", run, skip)
	}
	if run, skip := splitSections(DefaultSections(true), re); !slices.Equal(run, []string{SectionRemote}) || skip != "" {
		t.Errorf("remote instance, default sections: run %q, skip %q", run, skip)
	}
}

func TestStaticBusyboxRefusesWhatCannotRunInAnEmptyImage(t *testing.T) {
	text := filepath.Join(t.TempDir(), "busybox")
	os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755)
	dynamic, _ := filepath.EvalSymlinks("/bin/sh") // dash or bash, both dynamic on Debian
	cases := []struct{ path, arch, want string }{
		{"", "amd64", "no static busybox"},
		{filepath.Join(t.TempDir(), "missing"), "amd64", "no such file"},
		{text, "amd64", "is not a Linux binary"},
		{dynamic, runtime.GOARCH, "dynamically linked"},
		{"/bin/busybox", "riscv64", `runs on "riscv64"; accepted: amd64 or arm64`},
		{"/bin/busybox", otherArch(), "give a static busybox for " + otherArch() + " with --busybox"},
	}
	for _, c := range cases {
		if (c.path == "/bin/busybox" || c.path == dynamic) && !isFile(c.path) {
			continue
		}
		_, err := staticBusybox(c.path, c.arch)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("staticBusybox(%q, %s) = %v; want one line with %q", c.path, c.arch, err, c.want)
		}
	}
	if isFile("/bin/busybox") && runtime.GOOS == "linux" {
		if b, err := staticBusybox("/bin/busybox", runtime.GOARCH); err != nil || len(b) == 0 {
			t.Errorf("Debian's busybox-static refused: %v", err)
		}
	}
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func otherArch() string {
	if runtime.GOARCH == "arm64" {
		return "amd64"
	}
	return "arm64"
}

// fakeEngine is the server's Docker engine as the remote section uses it:
// pings, its version, an import, and a container whose "busybox httpd" is
// an HTTP server on this machine's loopback serving what the container's
// command asks for.
type fakeEngine struct {
	t        *testing.T
	sock     string
	mu       sync.Mutex
	imported []string // the files of each imported layer
	removed  []string
	files    *http.Server
	port     int
}

func (e *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case r.URL.Path == "/_ping":
		io.WriteString(w, "OK")
	case r.URL.Path == "/version":
		json.NewEncoder(w).Encode(map[string]string{"Os": "linux", "Arch": runtime.GOARCH})
	case r.URL.Path == "/images/create":
		tr := tar.NewReader(r.Body)
		for h, err := tr.Next(); err == nil; h, err = tr.Next() {
			e.imported = append(e.imported, h.Name)
		}
		io.WriteString(w, `{"status":"sha256:1234"}`+"\n")
	case r.URL.Path == "/containers/create":
		var body struct{ Cmd []string }
		json.NewDecoder(r.Body).Decode(&body)
		e.serveFiles(body.Cmd)
		io.WriteString(w, `{"Id":"c1"}`)
	case r.URL.Path == "/containers/c1/start":
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/containers/c1/json":
		fmt.Fprintf(w, `{"NetworkSettings":{"Ports":{"8080/tcp":[{"HostIp":"0.0.0.0","HostPort":"%d"}]}}}`, e.port)
	case r.Method == http.MethodDelete:
		e.removed = append(e.removed, r.URL.Path)
		if e.files != nil && r.URL.Path == "/containers/c1" {
			e.files.Close()
		}
	default:
		http.Error(w, "not faked: "+r.URL.Path, http.StatusNotFound)
	}
}

// serveFiles serves /big (cmd's $0 MiB) and /small (its $1, the token).
func (e *fakeEngine) serveFiles(cmd []string) {
	if len(cmd) != 7 || cmd[0] != "/bin/busybox" || !strings.Contains(cmd[3], "httpd") {
		e.t.Errorf("container command %q", cmd)
		return
	}
	var mib int
	fmt.Sscan(cmd[4], &mib)
	big, token := make([]byte, mib<<20), cmd[5]+"\n"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Error(err)
		return
	}
	e.port = ln.Addr().(*net.TCPAddr).Port
	e.files = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(big)
		} else {
			io.WriteString(w, token)
		}
	})}
	go e.files.Serve(ln)
}

// fakeForward stands in for `ssh -L`: a proxy from local to remote, each
// a unix socket path or a TCP address.
func fakeForward(local, remote string) (func() error, error) {
	network := func(a string) string {
		if filepath.IsAbs(a) {
			return "unix"
		}
		return "tcp"
	}
	ln, err := net.Listen(network(local), local)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial(network(remote), remote)
				if err != nil {
					return
				}
				defer up.Close()
				connpipe.Pipe(c, up)
			}()
		}
	}()
	return ln.Close, nil
}

// The whole section against a fake engine and fake ssh forwards: every
// row of both parts, nothing skipped, and the server left as it was (the
// container and the image removed).
func TestRemoteSectionMeasuresEveryPathAndCleansUp(t *testing.T) {
	if !isFile("/bin/busybox") || runtime.GOOS != "linux" {
		t.Skip("no /bin/busybox (apt-get install busybox-static)")
	}
	dir := shortdir.New(t)
	e := &fakeEngine{t: t, sock: filepath.Join(dir, "engine.sock")}
	ln, err := net.Listen("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e}
	go srv.Serve(ln)
	defer srv.Close()
	env := Env{DockerSocket: e.sock, Remote: &RemoteEnv{
		Server: "ssh://me@build", Host: "127.0.0.1", EngineSocket: e.sock,
		Forward: fakeForward, ForwardSocket: filepath.Join(dir, "forward.sock"), Busybox: "/bin/busybox",
	}}
	rep := &Report{}
	if err := Run(context.Background(), env, Options{Sections: []string{"disk", SectionRemote}, Quick: true}, rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Skipped) != 1 || !strings.HasPrefix(rep.Skipped[0], "disk: a remote instance runs no VM") {
		t.Errorf("skipped %q; want the disk section's line only", rep.Skipped)
	}
	var got []string
	for _, r := range rep.Results {
		if r.Value <= 0 || (!r.Baseline && r.Ratio <= 0) {
			t.Errorf("row %+v", r)
		}
		got = append(got, r.Metric+" / "+r.Variant)
	}
	var want []string
	for _, m := range []string{"docker GET /_ping", "docker GET /version", "docker GET /_ping, new connection each"} {
		for _, p := range []string{" p50", " p90"} {
			want = append(want, m+p+" / "+remoteSSH, m+p+" / "+remoteSession)
		}
	}
	ports := []string{remoteDirect, remoteSSH, remoteSession + " (localhost)"}
	for _, m := range []string{"published port download 64MB", "published port connect+first byte p50", "published port connect+first byte p90"} {
		for _, v := range ports {
			want = append(want, m+" / "+v)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !slices.Contains(e.imported, "bin/busybox") {
		t.Errorf("imported layer %q; want bin/busybox in it", e.imported)
	}
	if len(e.removed) != 2 || e.removed[0] != "/containers/c1" || !strings.HasPrefix(e.removed[1], "/images/vmdock-bench-busybox:") {
		t.Errorf("removed %q; want the container, then the image", e.removed)
	}
}
