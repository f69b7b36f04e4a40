package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
)

func TestNerdctlRunsInTheSameFolder(t *testing.T) {
	_, user := env(t)
	fake := installFake(t)
	if _, err := run("start", "--runtime", "containerd"); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(user, "my project")
	must(t, os.MkdirAll(project, 0o755))
	t.Chdir(project)
	out, err := run("nerdctl", "ps", "-a")
	if code, ok := err.(exitError); !ok || code.code != 3 {
		t.Fatalf("exit status: %v (output %q)", err, out)
	}
	if got := fake.execs[len(fake.execs)-1]; !slices.Equal(got, []string{"nerdctl", "ps", "-a"}) {
		t.Errorf("argv %q", got)
	}
	if got := fake.dirs[len(fake.dirs)-1]; got != project {
		t.Errorf("working folder %q, want %q (the home folder is shared at the same path)", got, project)
	}
	if strings.Contains(out, "not shared") {
		t.Errorf("warned about a shared folder: %q", out)
	}

	// "--" keeps nerdctl's flags from vmdock's parser.
	if _, err := run("nerdctl", "-p", "default", "--", "--namespace", "k8s.io", "images"); err == nil || err.(exitError).code != 3 {
		t.Fatalf("with --: %v", err)
	}
	if got := fake.execs[len(fake.execs)-1]; !slices.Equal(got, []string{"nerdctl", "--namespace", "k8s.io", "images"}) {
		t.Errorf("argv after --: %q", got)
	}

	elsewhere := t.TempDir()
	t.Chdir(elsewhere)
	out, _ = run("nerdctl", "ps")
	if got := fake.dirs[len(fake.dirs)-1]; got != "/" || !strings.Contains(out, elsewhere+" is not shared with the guest; nerdctl runs in /") {
		t.Errorf("outside the shares: dir %q, output %q", got, out)
	}
}

func TestNerdctlOnADockerInstance(t *testing.T) {
	env(t)
	fake := installFake(t)
	if _, err := run("start"); err != nil {
		t.Fatal(err)
	}
	_, err := run("nerdctl", "ps")
	if err == nil || !strings.Contains(err.Error(), "runs the docker runtime: use `docker`") {
		t.Fatalf("nerdctl on docker: %v", err)
	}
	if len(fake.execs) != 0 {
		t.Errorf("ran %q", fake.execs)
	}
}

func TestNerdctlInstall(t *testing.T) {
	env(t)
	installFake(t)
	if _, err := run("start", "--runtime", "containerd"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out, err := run("nerdctl", "install", "--path", dir)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "nerdctl")
	b, err := os.ReadFile(script)
	must(t, err)
	fi, _ := os.Stat(script)
	if !strings.Contains(out, "wrote "+script) || fi.Mode().Perm() != 0o755 ||
		!strings.HasPrefix(string(b), "#!/bin/sh\n") || !strings.Contains(string(b), "nerdctl -p 'default' -- \"$@\"\n") {
		t.Errorf("script (%v):\n%s\noutput %q", fi.Mode(), b, out)
	}
	// Its own script is replaced; anything else is not.
	if _, err := run("nerdctl", "install", "--path", dir); err != nil {
		t.Errorf("second install: %v", err)
	}
	must(t, os.WriteFile(script, []byte("#!/bin/sh\necho the real nerdctl\n"), 0o755))
	_, err = run("nerdctl", "install", "--path", dir)
	if err == nil || !strings.Contains(err.Error(), "vmdock did not write it") {
		t.Errorf("over a foreign file: %v", err)
	}
	if b, _ := os.ReadFile(script); string(b) != "#!/bin/sh\necho the real nerdctl\n" {
		t.Errorf("foreign file changed: %q", b)
	}
	if _, err := run("nerdctl", "install", "--path", filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("missing folder: %v", err)
	}
}

func TestGuestFolder(t *testing.T) {
	cfg := config.Config{MountType: "virtiofs", Mounts: []mounts.Mount{
		{Location: "/home/u", Writable: true},
		{Location: "/home/u/app", Mode: "sync"},
		{Location: "/data", GuestPath: "/mnt/data"},
	}}
	for wd, want := range map[string]string{
		"/home/u":         "/home/u",
		"/home/u/app/src": "/home/u/app/src",
		"/data/x":         "/mnt/data/x",
		"/home/user2":     "/",
		"/":               "/",
	} {
		got, shared := guestFolder(cfg, wd)
		if got != want || shared != (want != "/") {
			t.Errorf("%s: %q %v, want %q", wd, got, shared, want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestDockerEnvOnAContainerdInstance(t *testing.T) {
	env(t)
	installFake(t)
	if _, err := run("start", "--runtime", "containerd"); err != nil {
		t.Fatal(err)
	}
	out, err := run("docker-env")
	if err == nil || !strings.Contains(err.Error(), "runs the containerd runtime, which has no Docker socket") || strings.Contains(out, "DOCKER_HOST") {
		t.Fatalf("docker-env: %q %v", out, err)
	}
}
