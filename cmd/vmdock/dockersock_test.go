package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/dockerhost/dockersock"

	"github.com/vmdock/vmdock/internal/shortdir"
)

func TestDockerSockLinkStatusUnlink(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	if _, err := run("start"); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(shortdir.New(t), "docker.sock")
	t.Setenv(dockersock.PathEnv, link)
	socket := filepath.Join(home, "default", "docker.sock")

	out, err := run("docker-sock", "link")
	if err != nil {
		t.Fatalf("link: %v\n%s", err, out)
	}
	if !strings.Contains(out, "running: ln -s "+socket+" "+link) || !strings.Contains(out, "linked "+link) || !strings.Contains(out, "dangling") {
		t.Errorf("link printed:\n%s\nwant the ln command, linked %s, and dangling (the instance is not running)", out, link)
	}
	if got, _ := os.Readlink(link); got != socket {
		t.Fatalf("link points at %q, want %s", got, socket)
	}

	ln, err := net.Listen("unix", socket) // the host agent's socket, as a start makes it
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, err = run("docker-sock", "status", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var st dockersock.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.State != dockersock.Live || st.Profile != "default" {
		t.Errorf("status --json = %s (%v), want live for profile default", out, err)
	}

	if out, err = run("docker-sock", "unlink"); err != nil || !strings.Contains(out, "removed "+link) {
		t.Fatalf("unlink: %v\n%s", err, out)
	}
	if _, err := os.Lstat(link); err == nil {
		t.Fatal("link still there after unlink")
	}
	if out, err = run("docker-sock", "status"); err != nil || !strings.Contains(out, link+": absent") {
		t.Errorf("status after unlink: %v\n%s", err, out)
	}

	// A file vmdock did not create is refused and left as it was.
	if err := os.WriteFile(link, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"link", "unlink"} {
		out, err = run("docker-sock", verb)
		if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "a regular file") {
			t.Errorf("%s over a regular file: %v\n%s", verb, err, out)
		}
	}
	if b, _ := os.ReadFile(link); string(b) != "mine" {
		t.Errorf("the regular file now holds %q", b)
	}
}

func TestDockerSockLinkRefusesAContainerdProfile(t *testing.T) {
	env(t)
	installFake(t)
	if _, err := run("start", "--runtime", "containerd"); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(shortdir.New(t), "docker.sock")
	t.Setenv(dockersock.PathEnv, link)
	_, err := run("docker-sock", "link")
	if err == nil || !strings.Contains(err.Error(), "containerd runtime") {
		t.Fatalf("err = %v, want the containerd runtime named", err)
	}
	if _, err := os.Lstat(link); err == nil {
		t.Error("a link was made")
	}
}

func TestDockerSockLinkNeedsAnExistingProfile(t *testing.T) {
	env(t)
	t.Setenv(dockersock.PathEnv, filepath.Join(shortdir.New(t), "docker.sock"))
	if _, err := run("docker-sock", "link", "-p", "nope"); err == nil || !strings.Contains(err.Error(), `"nope" does not exist`) {
		t.Fatalf("err = %v", err)
	}
}
