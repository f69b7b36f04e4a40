package migratetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/vmdock/vmdock/dockerhost/engineapi"
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

// Start runs one dockerd per name in a folder of its own under parent
// (made for this run, so runs at once, such as the migrate tests and the
// e2e, or two test runs, never share or end each other's daemons), their
// containerd objects in namespace, and waits until each answers. Each
// daemon dies with the process that started it, so a killed run leaves
// none behind.
func Start(parent, namespace string, names ...string) (*Engines, error) {
	return StartWith(parent, namespace, Options{}, names...)
}

// Options change where Start's engines run.
type Options struct {
	// NetNS is a network namespace (/proc/PID/ns/net) the engines run in,
	// with the default bridge network (published ports, host-gateway);
	// empty: each runs in a namespace of its own, with no bridge.
	NetNS string
}

// StartWith is Start with options.
func StartWith(parent, namespace string, o Options, names ...string) (*Engines, error) {
	dockerd, err := DockerdPath()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("dockerd needs root")
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("test engines' folder: %w", err)
	}
	root, err := os.MkdirTemp(parent, "run-")
	if err != nil {
		return nil, fmt.Errorf("test engines' folder: %w", err)
	}
	es := &Engines{Root: root}
	for _, name := range names {
		e, err := startOne(dockerd, filepath.Join(root, name), namespace, o)
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
func startOne(dockerd, dir, namespace string, o Options) (*Engine, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("test engine folder: %w", err)
	}
	sock := filepath.Join(dir, "d.sock")
	// A config of its own, not the host's /etc/docker/daemon.json, with a
	// key of its own: dockerd 20.10 derives its engine ID from the key,
	// and two engines sharing /etc/docker/key.json would be one engine to
	// migrate.
	config := filepath.Join(dir, "daemon.json")
	key, err := json.Marshal(map[string]string{"deprecated-key-path": filepath.Join(dir, "key.json")})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(config, key, 0o600); err != nil {
		return nil, fmt.Errorf("test engine config: %w", err)
	}
	args := []string{dockerd, "--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "pid"), "-H", "unix://" + sock, "--bridge=none", "--iptables=false",
		"--ip6tables=false", "--storage-driver=vfs", "--containerd-namespace=" + namespace, "--config-file", config}
	attr := &syscall.SysProcAttr{Setpgid: true, Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if o.NetNS != "" {
		// nsenter execs dockerd itself, so the process is still dockerd.
		args = append([]string{"nsenter", "--net=" + o.NetNS}, slices.DeleteFunc(args, func(a string) bool { return a == "--bridge=none" })...)
		attr.Cloneflags = 0
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(dockerd)+":"+BinDir+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = attr
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
	c := engineapi.Unix(sock)
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Ping(ctx)
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
