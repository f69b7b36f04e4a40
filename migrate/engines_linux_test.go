package migrate

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testEngineDir holds the test engines' folders; a fixed place, so a run
// killed before its cleanup has its daemons ended by the next one.
const testEngineDir = "/tmp/vmdock-migrate-test"

// testEngineBinDir is where hack/deps.sh puts Debian's dockerd,
// containerd and runc for these tests, off PATH.
const testEngineBinDir = "/usr/local/lib/vmdock-test-engine"

var (
	enginesOnce    sync.Once
	enginesErr     error
	sourceEngine   *Engine
	targetEngine   *Engine
	runningEngines []*exec.Cmd
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopEngines()
	os.Exit(code)
}

// requireEngines starts the two engines once per package run; without
// dockerd or root it skips, or fails under CI=true, where hack/deps.sh
// installed dockerd and the suite runs as root.
func requireEngines(t *testing.T) (*Engine, *Engine) {
	t.Helper()
	enginesOnce.Do(func() { enginesErr = startEngines() })
	if enginesErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("test docker engines: %v", enginesErr)
		}
		t.Skipf("test docker engines: %v", enginesErr)
	}
	return sourceEngine, targetEngine
}

func dockerdPath() (string, error) {
	if p, err := exec.LookPath("dockerd"); err == nil {
		return p, nil
	}
	p := filepath.Join(testEngineBinDir, "dockerd")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no dockerd on PATH or in %s: run hack/deps.sh", testEngineBinDir)
	}
	return p, nil
}

func startEngines() error {
	dockerd, err := dockerdPath()
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("dockerd needs root")
	}
	killLeftovers()
	if err := os.MkdirAll(testEngineDir, 0o700); err != nil {
		return err
	}
	for _, name := range []string{"src", "dst"} {
		e, err := startEngine(dockerd, filepath.Join(testEngineDir, name))
		if err != nil {
			stopEngines()
			return err
		}
		if name == "src" {
			sourceEngine = e
		} else {
			targetEngine = e
		}
	}
	return nil
}

// startEngine runs dockerd in dir, in its own network namespace so the
// networks the test creates never touch this host's, and waits for it.
func startEngine(dockerd, dir string) (*Engine, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "d.sock")
	cmd := exec.Command(dockerd, "--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "pid"), "-H", "unix://"+sock, "--bridge=none", "--iptables=false",
		"--ip6tables=false", "--storage-driver=vfs", "--containerd-namespace=vmdock-migrate-test")
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(dockerd)+":"+testEngineBinDir+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Cloneflags: syscall.CLONE_NEWNET}
	logf, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start dockerd: %w", err)
	}
	runningEngines = append(runningEngines, cmd)
	_ = os.WriteFile(filepath.Join(dir, "pgid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	e := NewEngine(sock)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if e.Ping(context.Background()) == nil {
			return e, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("dockerd in %s did not answer within 60s (see its dockerd.log)", dir)
}

func stopEngines() {
	for _, cmd := range runningEngines {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	runningEngines = nil
	if sourceEngine != nil || targetEngine != nil {
		_ = os.RemoveAll(testEngineDir)
	}
}

// killLeftovers ends the daemons of an earlier run that died before its
// cleanup, by the process groups it recorded.
func killLeftovers() {
	files, _ := filepath.Glob(filepath.Join(testEngineDir, "*", "pgid"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if pgid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pgid > 1 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	if len(files) > 0 {
		time.Sleep(time.Second)
	}
	_ = os.RemoveAll(testEngineDir)
}

// importImage makes an image from a tar of files with
// POST /images/create?fromSrc=-, so nothing is pulled.
func importImage(t *testing.T, e *Engine, repo, tag string, files map[string][]byte) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(1700000000, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	q := url.Values{"fromSrc": {"-"}, "repo": {repo}, "tag": {tag}}
	resp, err := e.do(context.Background(), http.MethodPost, "/images/create", q, &buf, "application/x-tar")
	if err != nil {
		t.Fatalf("import %s:%s: %v", repo, tag, err)
	}
	defer resp.Body.Close()
	if err := loadStreamError(resp.Body); err != nil {
		t.Fatalf("import %s:%s: %v", repo, tag, err)
	}
}

func mustCall(t *testing.T, e *Engine, method, path string, query url.Values, in, out any) {
	t.Helper()
	if err := e.call(context.Background(), method, path, query, in, out); err != nil {
		t.Fatal(err)
	}
}
