package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/remote"
	"github.com/vmdock/vmdock/vm/store"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// fakeVM replaces the lifecycle so no test boots anything.
type fakeVM struct {
	starts []config.Config
	stops  []bool
	noSave []bool
	execs  [][]string
	dirs   []string // the working folder of each exec
}

func installFake(t *testing.T) *fakeVM {
	t.Helper()
	f := &fakeVM{}
	saved := [...]any{startVM, stopVM, deleteVM, execVM, runHostAgent, execVMIn, prepareImage}
	prepareImage = func(context.Context, *store.Instance, config.Config, bool, io.Writer) error { return nil }
	startVM = func(_ context.Context, _ *store.Instance, cfg config.Config, _ instance.StartOptions) error {
		f.starts = append(f.starts, cfg)
		return nil
	}
	stopVM = func(_ context.Context, _ *store.Instance, opts instance.StopOptions) error {
		f.stops = append(f.stops, opts.Force)
		f.noSave = append(f.noSave, opts.NoSave)
		return nil
	}
	deleteVM = func(_ context.Context, inst *store.Instance, _ instance.DeleteOptions) error {
		return os.RemoveAll(inst.Dir)
	}
	execVM = func(_ context.Context, _ *store.Instance, argv []string, _ io.Reader, _, _ io.Writer) (int, error) {
		f.execs = append(f.execs, argv)
		return 3, nil
	}
	execVMIn = func(_ context.Context, _ *store.Instance, dir string, argv []string, _ io.Reader, _, _ io.Writer) (int, error) {
		f.execs = append(f.execs, argv)
		f.dirs = append(f.dirs, dir)
		return 3, nil
	}
	runHostAgent = func(context.Context, *store.Instance, config.Host) error { return errors.New("fake host agent") }
	t.Cleanup(func() {
		execVMIn = saved[5].(func(context.Context, *store.Instance, string, []string, io.Reader, io.Writer, io.Writer) (int, error))
		prepareImage = saved[6].(func(context.Context, *store.Instance, config.Config, bool, io.Writer) error)
		startVM = saved[0].(func(context.Context, *store.Instance, config.Config, instance.StartOptions) error)
		stopVM = saved[1].(func(context.Context, *store.Instance, instance.StopOptions) error)
		deleteVM = saved[2].(func(context.Context, *store.Instance, instance.DeleteOptions) error)
		execVM = saved[3].(func(context.Context, *store.Instance, []string, io.Reader, io.Writer, io.Writer) (int, error))
		runHostAgent = saved[4].(func(context.Context, *store.Instance, config.Host) error)
	})
	return f
}

// env gives a test its own VMDOCK_HOME and HOME (the default mount).
func env(t *testing.T) (home, user string) {
	t.Helper()
	// Short: the instance sockets under it must fit macOS's sun_path.
	home = filepath.Join(shortdir.New(t), "vmdock-home")
	// Short too: error lines name folders under it, and must stay short.
	user = shortdir.New(t)
	t.Setenv(store.HomeEnv, home)
	t.Setenv("HOME", user)
	t.Setenv(ProfileEnv, "")
	return home, user
}

func run(args ...string) (string, error) {
	root := newRootCmd(testHost)
	var out bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(""))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// treeHash fingerprints every name, mode and byte under dir.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			fmt.Fprint(h, "absent")
			return nil
		}
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d\n", p, fi.Mode(), fi.Size())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestStartRejectsBadInput(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		existing bool   // start the profile once (fake) before the bad command
		yaml     string // written as the saved config first (implies existing)
		want     []string
	}{
		{name: "cpus 0", args: []string{"--cpus", "0"}, want: []string{"cpus: 0"}},
		{name: "cpus -1", args: []string{"-c", "-1"}, want: []string{"cpus: -1"}},
		{name: "cpus 1000", args: []string{"--cpu", "1000"}, want: []string{"cpus: 1000"}},
		{name: "cpus word", args: []string{"--cpus", "two"}, want: []string{`"two"`}},
		{name: "memory abc", args: []string{"--memory", "abc"}, want: []string{`"abc"`, "memory"}},
		{name: "memory 0", args: []string{"-m", "0"}, want: []string{"memory: 0"}},
		{name: "disk below minimum", args: []string{"--disk", "5"}, want: []string{"disk: 5", "10 to"}},
		{name: "arch", args: []string{"--arch", "mips"}, want: []string{`arch: "mips"`}},
		{name: "unknown vm-type", args: []string{"--vm-type", "kvm"}, want: []string{`vmType: "kvm"`, "vz or qemu"}},
		{name: "vz on linux", args: []string{"--vm-type", "vz"}, want: []string{`vmType: "vz"`, "macOS 13"}},
		{name: "rosetta on this host", args: []string{"--vz-rosetta"}, want: []string{"vzRosetta"}},
		{name: "nested virtualization on this host", args: []string{"--vz-nested-virtualization"}, want: []string{"vzNestedVirtualization: true is not accepted; accepted: false unless vmType is vz"}},
		{name: "mount type", args: []string{"--mount-type", "nfs"}, want: []string{`mountType: "nfs"`}},
		{name: "runtime podman", args: []string{"--runtime", "podman"}, want: []string{`runtime: "podman"`, "accepted: docker, containerd"}},
		{name: "disk-sync", args: []string{"--disk-sync", "sometimes"}, want: []string{`diskSync: "sometimes"`}},
		{name: "network-mode", args: []string{"--network-mode", "bridged"}, want: []string{`network.mode: "bridged"`}},
		{name: "port-bind", args: []string{"--port-bind", "localhost"}, want: []string{`network.portBind: "localhost"`}},
		{name: "loopback ip", args: []string{"--loopback-alias-ip", "10.254.254"}, want: []string{`network.loopbackAliasIP: "10.254.254"`}},
		{name: "dns", args: []string{"--dns", "one.one.one.one"}, want: []string{`network.dns: "one.one.one.one"`}},
		{name: "env =x", args: []string{"--env", "=x"}, want: []string{`env: "=x"`}},
		{name: "env no =", args: []string{"--env", "FOO"}, want: []string{`env: "FOO"`}},
		{name: "env bad name", args: []string{"--env", "1A=b"}, want: []string{`env: "1A="`}},
		{name: "relative mount", args: []string{"-V", "some/dir"}, want: []string{`"some/dir" is relative`}},
		{name: "missing mount", args: []string{"-V", "/nonexistent/vmdock-test:w"}, want: []string{"does not exist"}},
		{name: "overlapping mounts", args: []string{"-V", "~", "-V", "~/sub:/sub"}, want: []string{"overlap"}},
		{name: "duplicate guest path", args: []string{"-V", "~/sub:/x", "-V", "~/other:/x"}, want: []string{`both use mountPoint "/x"`}},
		{name: "colon in -V path", args: []string{"-V", "/tmp/a:b:c"}, want: []string{"':' inside a path", "mounts:"}},
		{name: "bad profile", args: []string{"-p", "../x"}, want: []string{`profile "../x"`}},
		{name: "unknown flag", args: []string{"--cpuz", "2"}, want: []string{"cpuz"}},
		{name: "extra arg", args: []string{"now"}, want: []string{`"now"`}},
		{name: "many problems at once", args: []string{"--cpus", "0", "--disk", "1", "--runtime", "x"}, want: []string{"cpus: 0", "disk: 1", `runtime: "x"`}},
		{name: "bad yaml", yaml: "cpus: [\n", want: []string{"invalid YAML"}},
		{name: "unknown yaml key", yaml: "cpu: 2\n", want: []string{"field cpu not found"}},
		{name: "bad yaml value", yaml: "cpus: 0\n", want: []string{"cpus: 0"}},
		{name: "shrink disk", existing: true, args: []string{"--disk", "20"}, want: []string{"disk: cannot shrink from 60 to 20"}},
		{name: "change arch", existing: true, args: []string{"--arch", otherArch()}, want: []string{"arch: cannot change"}},
		{name: "change runtime", yaml: "runtime: containerd\n", want: []string{`runtime: "containerd"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, user := env(t)
			fake := installFake(t)
			for _, d := range []string{"sub", "other"} {
				os.Mkdir(filepath.Join(user, d), 0o755)
			}
			if tt.existing || tt.yaml != "" {
				if _, err := run("start"); err != nil {
					t.Fatalf("setup start: %v", err)
				}
			}
			if tt.yaml != "" {
				if err := os.WriteFile(filepath.Join(home, "default", "vmdock.yaml"), []byte(tt.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			before := treeHash(t, home)
			nStarts := len(fake.starts)
			out, err := run(append([]string{"start"}, tt.args...)...)
			if err == nil {
				t.Fatalf("start %v succeeded; output %q", tt.args, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.TrimSpace(line) == "" || len(line) > 300 {
					t.Errorf("error line %q is empty or too long", line)
				}
			}
			if after := treeHash(t, home); after != before {
				t.Errorf("rejected command changed %s", home)
			}
			if len(fake.starts) != nStarts {
				t.Errorf("rejected command started the VM")
			}
		})
	}
}

func otherArch() string {
	if testHost.Arch == "arm64" {
		return "amd64"
	}
	return "arm64"
}

func TestStartSavesFlags(t *testing.T) {
	home, user := env(t)
	fake := installFake(t)
	spaced := filepath.Join(user, "My Projects")
	other := filepath.Join(user, "other")
	for _, d := range []string{spaced, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := run("start", "--cpu", "1", "-m", "1.5", "-V", spaced+":w", "-V", "~/other/:/hosthome", "--env", "A=b=c", "--dns", "1.1.1.1"); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(filepath.Join(home, "default", "vmdock.yaml"), testHost)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CPUs != 1 || cfg.MemoryGiB != 1.5 || cfg.DiskGiB != config.DefaultDiskGiB || cfg.Env["A"] != "b=c" || len(cfg.Network.DNS) != 1 {
		t.Fatalf("saved config %+v", cfg)
	}
	wantMounts := []config.Mount{{Location: spaced, GuestPath: spaced, Writable: true}, {Location: other, GuestPath: "/hosthome"}}
	if fmt.Sprint(cfg.Mounts) != fmt.Sprint(wantMounts) {
		t.Fatalf("mounts %+v, want %+v", cfg.Mounts, wantMounts)
	}
	if fi, err := os.Stat(filepath.Join(home, "default")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("instance folder mode: %v %v", fi, err)
	}
	// A later start keeps the saved values and applies only the new flag.
	if _, err := run("start", "--disk", "80"); err != nil {
		t.Fatal(err)
	}
	if got := fake.starts[1]; got.CPUs != 1 || got.DiskGiB != 80 || len(got.Mounts) != 2 {
		t.Fatalf("second start config %+v", got)
	}
	// The template seeds new profiles.
	if err := os.WriteFile(filepath.Join(home, "template.yaml"), []byte("cpus: 1\nmemory: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run("start", "-p", "second"); err != nil {
		t.Fatal(err)
	}
	if got := fake.starts[2]; got.MemoryGiB != 3 {
		t.Fatalf("template not used: %+v", got)
	}
}

// TestLockHolder is not a test: TestConcurrentCommands runs it as the
// process holding the lock.
func TestLockHolder(t *testing.T) {
	dir := os.Getenv("VMDOCK_TEST_HOLD")
	if dir == "" {
		t.Skip("helper process only")
	}
	l, err := (&store.Instance{Name: "default", Dir: dir}).Lock()
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	bufio.NewReader(os.Stdin).ReadString('\n')
	l.Unlock()
	os.Exit(0)
}

func TestConcurrentCommands(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	if _, err := run("start"); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command(os.Args[0], "-test.run=^TestLockHolder$")
	holder.Env = append(os.Environ(), "VMDOCK_TEST_HOLD="+filepath.Join(home, "default"))
	stdin, _ := holder.StdinPipe()
	stdout, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); holder.Wait() }()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); strings.TrimSpace(line) != "locked" {
		t.Fatalf("holder said %q", line)
	}
	pid := "pid " + strconv.Itoa(holder.Process.Pid)
	for _, args := range [][]string{{"start"}, {"stop"}, {"delete"}, {"restart"}} {
		_, err := run(args...)
		if err == nil || !strings.Contains(err.Error(), pid) {
			t.Errorf("%v while locked: %v, want an error naming %s", args, err, pid)
		}
	}
}

// TestRestartStopsThenStartsWithTheSavedConfig: restart is a graceful
// stop (one that may save the VM, as a plain stop does) and then a start
// with the config the last start saved, flags and all. The e2e runs it
// once, on a running containerd instance.
func TestRestartStopsThenStartsWithTheSavedConfig(t *testing.T) {
	env(t)
	fake := installFake(t)
	if _, err := run("start", "--cpus", "1", "--memory", "3"); err != nil {
		t.Fatal(err)
	}
	start := startVM
	stopsAtStart := -1
	startVM = func(ctx context.Context, inst *store.Instance, cfg config.Config, opts instance.StartOptions) error {
		stopsAtStart = len(fake.stops)
		return start(ctx, inst, cfg, opts)
	}
	if _, err := run("restart"); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if len(fake.stops) != 1 || fake.stops[0] || fake.noSave[0] {
		t.Errorf("restart's stops (force) %v, no-save %v: want one graceful stop that may save", fake.stops, fake.noSave)
	}
	if stopsAtStart != 1 {
		t.Errorf("restart started with %d stops done, want its stop first", stopsAtStart)
	}
	if len(fake.starts) != 2 || fake.starts[1].CPUs != 1 || fake.starts[1].MemoryGiB != 3 {
		t.Errorf("restart's start: %d starts, last %+v; want the saved cpus 1, memory 3", len(fake.starts), fake.starts[len(fake.starts)-1])
	}
	if _, err := run("restart", "--cpus", "2"); err == nil {
		t.Error("restart --cpus 2 succeeded: restart takes no flags, the saved config is what it starts")
	}
}

func TestStatusAndList(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	if _, err := run("status"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("status of a missing profile: %v", err)
	}
	if out, err := run("list"); err != nil || !strings.HasPrefix(out, "PROFILE") {
		t.Fatalf("empty list: %q %v", out, err)
	}
	for _, p := range []string{"default", "work"} {
		if _, err := run("start", "-p", p); err != nil {
			t.Fatal(err)
		}
	}
	out, err := run("status", "--json")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("status of a stopped instance: %v, want exit 1", err)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	for _, k := range []string{"profile", "status", "dir", "dockerSocket", "config"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status --json lacks %q: %s", k, out)
		}
	}
	if st["status"] != "Stopped" || st["config"].(map[string]any)["cpus"] == nil {
		t.Errorf("status --json = %s", out)
	}
	// A stale pid file makes the instance Broken.
	os.WriteFile(filepath.Join(home, "work", "ha.pid"), []byte("999999999\n"), 0o600)
	out, err = run("list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	for _, k := range []string{"profile", "status", "arch", "cpus", "memory", "disk", "runtime", "vmType", "dir"} {
		if _, ok := rows[0][k]; !ok {
			t.Errorf("list --json lacks %q", k)
		}
	}
	if rows[0]["status"] != "Stopped" || rows[1]["status"] != "Broken" || !strings.Contains(rows[1]["reason"].(string), "not running") {
		t.Errorf("list --json = %s", out)
	}
	out, err = run("ls")
	if err != nil || !strings.Contains(out, "PROFILE   STATUS") || !strings.Contains(out, "Broken: stale pid file") {
		t.Errorf("ls: %v\n%s", err, out)
	}
}

func TestOtherCommands(t *testing.T) {
	home, _ := env(t)
	fake := installFake(t)
	if _, err := run("stop"); err == nil {
		t.Error("stop of a missing profile succeeded")
	}
	if _, err := run("start"); err != nil {
		t.Fatal(err)
	}
	if _, err := run("stop", "--force"); err != nil || len(fake.stops) != 1 || !fake.stops[0] {
		t.Errorf("stop --force: %v %v", err, fake.stops)
	}
	if _, err := run("restart"); err != nil || len(fake.starts) != 2 {
		t.Errorf("restart: %v, starts %d", err, len(fake.starts))
	}
	if _, err := run("ssh", "--", "uname", "-a"); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("ssh to a stopped instance: %v", err)
	}
	os.WriteFile(filepath.Join(home, "default", "serial.log"), []byte("a\nb\nc\n"), 0o600)
	if out, err := run("logs", "serial", "-n", "2"); err != nil || out != "b\nc\n" {
		t.Errorf("logs serial -n 2 = %q, %v", out, err)
	}
	if _, err := run("logs", "kernel"); err == nil || !strings.Contains(err.Error(), `"kernel"`) {
		t.Errorf("logs kernel: %v", err)
	}
	if out, err := run("template"); err != nil || !strings.Contains(out, "cpus:") {
		t.Errorf("template: %q %v", out, err)
	}
	t.Setenv("VISUAL", "")
	t.Setenv("EDITOR", "sed -i s/^cpus:.*/cpus:\\ 0/")
	if _, err := run("template", "--edit"); err == nil || !strings.Contains(err.Error(), "cpus: 0") {
		t.Errorf("template --edit with a bad edit: %v", err)
	}
	if out, err := run("version"); err != nil || !strings.HasPrefix(out, "vmdock dev") {
		t.Errorf("version: %q %v", out, err)
	}
	if out, err := run("completion", "bash"); err != nil || !strings.Contains(out, "vmdock") {
		t.Errorf("completion: %v", err)
	}
	if _, err := run("hostagent"); err == nil || !strings.Contains(err.Error(), "fake host agent") {
		t.Errorf("hostagent: %v", err)
	}
	if _, err := run("delete"); err != nil {
		t.Errorf("delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, "default")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("delete left the instance")
	}
}

func TestExitCode(t *testing.T) {
	var buf bytes.Buffer
	if c := exitCode(exitError{code: 7}, &buf); c != 7 || buf.Len() != 0 {
		t.Errorf("exitError: %d %q", c, buf.String())
	}
	if c := exitCode(errors.Join(errors.New("a"), errors.New("b")), &buf); c != 1 || buf.String() != "vmdock: a\nvmdock: b\n" {
		t.Errorf("joined: %d %q", c, buf.String())
	}
}

// TestDeleteKeepsDataDisk runs the real instance.Delete on a stopped instance: a
// plain delete keeps data.raw and says where; `delete --data` then removes
// the leftover even though the profile no longer has a config.
func TestDeleteKeepsDataDisk(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	deleteVM = instance.Delete
	if _, err := run("start"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "default")
	data := filepath.Join(dir, "data.raw")
	if err := os.WriteFile(data, []byte("docker images"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run("delete")
	if err != nil || !strings.Contains(out, data) {
		t.Fatalf("delete: %q %v", out, err)
	}
	if b, err := os.ReadFile(data); err != nil || string(b) != "docker images" {
		t.Fatalf("data disk after delete: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "vmdock.yaml")); err == nil {
		t.Errorf("config survived delete")
	}
	if _, err := run("delete"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("second plain delete: %v", err)
	}
	if _, err := run("delete", "--data"); err != nil {
		t.Fatalf("delete --data of the leftover: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("instance folder still there after delete --data: %v", err)
	}
}

func TestBenchRawBootNeedsAnEarlierBoot(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	if _, err := run("start", "--vm-type", "qemu"); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, filepath.Join(home, "default"))
	_, err := run("bench", "--raw-boot")
	if err == nil || !strings.Contains(err.Error(), "start the instance once") {
		t.Fatalf("bench --raw-boot without spec.json: %v", err)
	}
	if treeHash(t, filepath.Join(home, "default")) != before {
		t.Error("a refused --raw-boot changed the instance folder")
	}
	if err := os.WriteFile(filepath.Join(home, "default", "spec.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run("bench", "--raw-boot"); err == nil || !strings.Contains(err.Error(), "spec.json") {
		t.Fatalf("bench --raw-boot with a bad spec.json: %v", err)
	}
}

// The data disk holds one runtime's images and containers; it outlives a
// plain delete, and so does the runtime it was made for.
func TestRuntimeStaysWithTheDataDisk(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	deleteVM = instance.Delete
	if _, err := run("start"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "default", "data.raw"), []byte("docker images"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run("delete"); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, home)
	_, err := run("start", "--runtime", "containerd")
	if err == nil || !strings.Contains(err.Error(), `runtime: "containerd": the data disk holds docker's images`) || !strings.Contains(err.Error(), "delete --data") {
		t.Fatalf("start --runtime containerd over a docker data disk: %v", err)
	}
	if after := treeHash(t, home); after != before {
		t.Error("the refused start changed the vmdock home")
	}
	if _, err := run("delete", "--data"); err != nil {
		t.Fatal(err)
	}
	if _, err := run("start", "--runtime", "containerd"); err != nil {
		t.Fatalf("start --runtime containerd on a fresh data disk: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(home, "default", "data.runtime"))
	if err != nil || strings.TrimSpace(string(b)) != "containerd" {
		t.Errorf("data.runtime = %q, %v", b, err)
	}
}

// A bad --remote is one line naming the value and what is accepted, and
// nothing is written; a good one saves the remote config and asks for no
// VM image.
func TestStartRemoteFlag(t *testing.T) {
	home, _ := env(t)
	f := installFake(t)
	prepareImage = func(context.Context, *store.Instance, config.Config, bool, io.Writer) error {
		return errors.New("a remote instance asked for a VM image")
	}
	for value, want := range map[string]string{
		"tcp://build:2375": `remote.url: "tcp://build:2375": scheme "tcp" is not supported; accepted: ssh://[user@]host[:port]`,
		"build":            `remote.url: "build" has no scheme; accepted: ssh://[user@]host[:port]`,
		"ssh://b:70000":    `port "70000" is not 1-65535`,
	} {
		_, err := run("start", "--remote", value)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("start --remote %s: %v; want one line with %q", value, err, want)
		}
		if _, err := os.Stat(filepath.Join(home, "default")); err == nil {
			t.Fatalf("start --remote %s made the instance folder", value)
		}
	}
	if _, err := run("start", "--remote", "ssh://me@build:2222"); err != nil {
		t.Fatal(err)
	}
	if len(f.starts) != 1 || f.starts[0].Remote == nil || f.starts[0].Remote.URL != "ssh://me@build:2222" || len(f.starts[0].Mounts) != 0 {
		t.Fatalf("started %+v; want one remote start with no mount", f.starts)
	}
	b, err := os.ReadFile(filepath.Join(home, "default", "vmdock.yaml"))
	if err != nil || !strings.Contains(string(b), "url: ssh://me@build:2222") || !strings.Contains(string(b), "- 9003") {
		t.Errorf("saved config %q (%v); want the URL and host port 9003", b, err)
	}
	out, err := run("status") // exit 1: stopped
	if !strings.Contains(out, "ssh://me@build:2222, engine /var/run/docker.sock, laptop ports for containers [9003] (no VM)") || strings.Contains(out, "vm:") {
		t.Errorf("status of a remote instance: %v\n%s", err, out)
	}
	if _, err := run("start", "--upgrade-image"); err == nil || !strings.Contains(err.Error(), "remote instance") {
		t.Errorf("start --upgrade-image on a remote instance: %v", err)
	}
	t.Setenv(remote.CommandEnv, "false") // a server that cannot be reached
	out, err = run("delete")
	if err != nil || !strings.Contains(out, "vmdock's helper stays on the server") || !strings.Contains(out, `profile "default" deleted`) {
		t.Errorf("delete of a remote instance whose server is away: %v\n%s", err, out)
	}
}
