package migratetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BinDir is where hack/deps.sh puts Debian's dockerd, containerd and runc
// for these engines, off PATH.
const BinDir = "/usr/local/lib/vmdock-test-engine"

// Engine is one dockerd started here, listening on Socket.
type Engine struct {
	Dir    string
	Socket string
	cmd    *exec.Cmd
}

// Engines are the dockerds of one Start, under one folder.
type Engines struct {
	Root string
	List []*Engine
}

// DockerdPath finds dockerd on PATH, else in BinDir.
func DockerdPath() (string, error) {
	if p, err := exec.LookPath("dockerd"); err == nil {
		return p, nil
	}
	p := filepath.Join(BinDir, "dockerd")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no dockerd on PATH or in %s: run hack/deps.sh", BinDir)
	}
	return p, nil
}

// Start runs one dockerd per name in root/<name>, their containerd
// objects in namespace, and waits until each answers. root is a fixed
// place per user of these engines: the daemons a killed run left there
// are ended first, by the process groups it recorded, so two users (the
// migrate tests and the e2e, which may run at once) need two roots.
func Start(root, namespace string, names ...string) (*Engines, error) {
	dockerd, err := DockerdPath()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("dockerd needs root")
	}
	KillLeftovers(root)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("test engines' folder: %w", err)
	}
	es := &Engines{Root: root}
	for _, name := range names {
		e, err := startOne(dockerd, filepath.Join(root, name), namespace)
		if e != nil {
			es.List = append(es.List, e)
		}
		if err != nil {
			es.Stop()
			return nil, err
		}
	}
	return es, nil
}

// startOne runs dockerd in dir, in its own network namespace so the
// networks a test creates never touch this host's, and waits for it. The
// engine is returned with an error once its process runs, so it can be
// stopped.
func startOne(dockerd, dir, namespace string) (*Engine, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("test engine folder: %w", err)
	}
	sock := filepath.Join(dir, "d.sock")
	cmd := exec.Command(dockerd, "--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "pid"), "-H", "unix://"+sock, "--bridge=none", "--iptables=false",
		"--ip6tables=false", "--storage-driver=vfs", "--containerd-namespace="+namespace)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(dockerd)+":"+BinDir+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Cloneflags: syscall.CLONE_NEWNET}
	logf, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		return nil, fmt.Errorf("dockerd log: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start dockerd: %w", err)
	}
	e := &Engine{Dir: dir, Socket: sock, cmd: cmd}
	_ = os.WriteFile(filepath.Join(dir, "pgid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if ping(sock) == nil {
			return e, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return e, fmt.Errorf("dockerd in %s did not answer within 60s (see its dockerd.log)", dir)
}

// ping asks the engine on sock for GET /_ping.
func ping(sock string) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://docker/_ping")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /_ping on %s: %s", sock, resp.Status)
	}
	return nil
}

// Stop ends every engine (SIGTERM to its process group, SIGKILL after
// 20 s) and removes the root folder.
func (es *Engines) Stop() {
	for _, e := range es.List {
		e.stop()
	}
	es.List = nil
	_ = os.RemoveAll(es.Root)
}

func (e *Engine) stop() {
	_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// KillLeftovers ends the daemons of an earlier run under root that died
// before its cleanup, by the process groups it recorded, and removes root.
func KillLeftovers(root string) {
	files, _ := filepath.Glob(filepath.Join(root, "*", "pgid"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if pgid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pgid > 1 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	if len(files) > 0 {
		time.Sleep(time.Second)
	}
	_ = os.RemoveAll(root)
}
