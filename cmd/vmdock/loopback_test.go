package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/network/loopback"
)

// recordingRunner stands in for ip/ifconfig and the service manager: it
// records every command and lists no alias on the loopback.
type recordingRunner struct{ cmds []string }

func (r *recordingRunner) Run(_ context.Context, _ []byte, argv ...string) ([]byte, error) {
	r.cmds = append(r.cmds, strings.Join(argv, " "))
	return nil, nil
}

// The loopback-alias verbs reach the Manager with the parent's --ip and
// add's --persist, and print their result on stdout.
func TestLoopbackAliasVerbs(t *testing.T) {
	env(t)
	root := t.TempDir()
	r := &recordingRunner{}
	orig := newLoopbackManager
	t.Cleanup(func() { newLoopbackManager = orig })
	newLoopbackManager = func(io.Writer) (*loopback.Manager, error) {
		return &loopback.Manager{Runner: r, Root: root, StatePath: filepath.Join(root, "state.json"), Privileged: true}, nil
	}
	const ip = "10.254.254.7"

	out, err := run("loopback-alias", "add", "--ip", ip, "--persist")
	if err != nil || !strings.Contains(out, "loopback alias "+ip+" added") {
		t.Fatalf("add: %v\n%s", err, out)
	}
	added := strings.Join(r.cmds, "\n")
	if !strings.Contains(added, ip) {
		t.Errorf("add ran %q, want a command adding %s", added, ip)
	}
	out, err = run("loopback-alias", "status", "--ip", ip)
	if err != nil || !strings.Contains(out, ip+": not on the loopback, persisted at boot, added by vmdock") {
		t.Errorf("status: %v\n%s", err, out)
	}
	out, err = run("loopback-alias", "remove", "--ip", ip)
	if err != nil || !strings.Contains(out, "loopback alias "+ip+" removed") {
		t.Errorf("remove: %v\n%s", err, out)
	}
	if _, err := run("loopback-alias", "add", "--ip", "127.0.0.9"); err == nil || !strings.Contains(err.Error(), `"127.0.0.9"`) {
		t.Errorf("add of a 127/8 address: %v, want the bad IP named", err)
	}
}
