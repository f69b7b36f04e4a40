package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/sockpath"
	"github.com/vmdock/vmdock/vm/store"
)

// A VMDOCK_HOME too long for the instance's sockets fails start at once,
// in one line naming the path, its length and the limit, before the
// instance folder is made or anything spawned.
func TestStartRefusesTooLongSocketPaths(t *testing.T) {
	_, _ = env(t)
	home := filepath.Join(t.TempDir(), strings.Repeat("h", sockpath.Max))
	t.Setenv(store.HomeEnv, home)
	fake := installFake(t)
	before := treeHash(t, home)
	_, err := run("start")
	if err == nil {
		t.Fatal("start with a too-long VMDOCK_HOME succeeded")
	}
	msg := err.Error()
	sock := filepath.Join(home, "default", "ha.sock")
	for _, want := range []string{sock, strconv.Itoa(len(sock)) + " bytes", strconv.Itoa(sockpath.Max), "VMDOCK_HOME"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	if treeHash(t, home) != before {
		t.Error("the refused start wrote into VMDOCK_HOME")
	}
	if len(fake.starts) != 0 {
		t.Error("the refused start started the VM")
	}
}
