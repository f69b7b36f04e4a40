package loopback

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestHasAliasLinux(t *testing.T) {
	out := "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n" +
		"1: lo    inet 10.254.254.254/32 scope global lo\\       valid_lft forever preferred_lft forever\n"
	tests := []struct {
		ip   string
		want bool
	}{
		{"10.254.254.254", true},
		{"127.0.0.1", true},
		{"10.254.254.25", false},
		{"10.254.254.2540", false},
	}
	for _, tt := range tests {
		if got := hasAlias(out, tt.ip); got != tt.want {
			t.Errorf("hasAlias(%s) = %v, want %v", tt.ip, got, tt.want)
		}
	}
}

// newNetns creates a throwaway network namespace so the real `ip`
// commands run for real without touching this machine's loopback.
func newNetns(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating a network namespace needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) not installed")
	}
	b := make([]byte, 4)
	rand.Read(b)
	ns := "vmdock-test-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("delete netns %s: %v: %s", ns, err, out)
		}
	})
	return ns
}

func hostLoopback(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "-4", "addr", "show", "dev", "lo").Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func nsHas(t *testing.T, ns, ip string) bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "ip", "-o", "-4", "addr", "show", "dev", "lo").Output()
	if err != nil {
		t.Fatal(err)
	}
	return hasAlias(string(out), ip)
}

func TestAddStatusRemoveInNetns(t *testing.T) {
	const ip = DefaultIP
	ns := newNetns(t)
	hostBefore := hostLoopback(t)
	var echo bytes.Buffer
	dir := t.TempDir()
	m := &Manager{
		Runner:     ExecRunner{Prefix: []string{"ip", "netns", "exec", ns}, Echo: &echo},
		Root:       dir,
		StatePath:  filepath.Join(dir, "home", "loopback-alias.json"),
		Privileged: true,
	}
	ctx := context.Background()

	st, err := m.Status(ctx, ip)
	if err != nil || st.Present || st.Recorded != nil {
		t.Fatalf("Status before add = %+v, %v", st, err)
	}
	if err := m.Add(ctx, ip, false); err != nil {
		t.Fatal(err)
	}
	if !nsHas(t, ns, ip) {
		t.Fatal("alias not on the namespace's loopback after Add")
	}
	st, err = m.Status(ctx, ip)
	if err != nil || !st.Present || st.Recorded == nil || !st.Recorded.Added || st.Persisted {
		t.Fatalf("Status after add = %+v, %v", st, err)
	}
	wantCmd := "running: ip netns exec " + ns + " ip addr add 10.254.254.254/32 dev lo\n"
	if !strings.Contains(echo.String(), wantCmd) {
		t.Errorf("echoed commands:\n%s\nwant a line %q", echo.String(), wantCmd)
	}
	// A second Add changes nothing and runs no second `ip addr add`.
	if err := m.Add(ctx, ip, false); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(echo.String(), "addr add"); n != 1 {
		t.Errorf("%d `ip addr add` runs, want 1", n)
	}
	if got := hostLoopback(t); got != hostBefore {
		t.Fatalf("host loopback changed:\n%s\nwas\n%s", got, hostBefore)
	}

	if err := m.Remove(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if nsHas(t, ns, ip) {
		t.Fatal("alias still on the namespace's loopback after Remove")
	}
	st, err = m.Status(ctx, ip)
	if err != nil || st.Present || st.Recorded != nil {
		t.Fatalf("Status after remove = %+v, %v", st, err)
	}
	if _, err := os.Stat(m.StatePath); !os.IsNotExist(err) {
		t.Errorf("state file left behind: %v", err)
	}
	if err := m.Remove(ctx, ip); err == nil || !strings.Contains(err.Error(), "did not add it") {
		t.Errorf("second Remove: %v, want 'did not add it'", err)
	}
}

func TestRemoveLeavesForeignAlias(t *testing.T) {
	const ip = "10.254.254.253"
	ns := newNetns(t)
	if out, err := exec.Command("ip", "netns", "exec", ns, "ip", "addr", "add", ip+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	dir := t.TempDir()
	m := &Manager{
		Runner:     ExecRunner{Prefix: []string{"ip", "netns", "exec", ns}},
		Root:       dir,
		StatePath:  filepath.Join(dir, "state.json"),
		Privileged: true,
	}
	ctx := context.Background()
	if err := m.Add(ctx, ip, false); err != nil {
		t.Fatal(err)
	}
	st, _ := m.Status(ctx, ip)
	if st.Recorded == nil || st.Recorded.Added {
		t.Fatalf("recorded %+v, want Added=false for an alias that was already there", st.Recorded)
	}
	if err := m.Remove(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if !nsHas(t, ns, ip) {
		t.Fatal("Remove deleted an alias vmdock did not add")
	}
}

// fakeRunner simulates the loopback and records every command, so the
// persistence steps (systemctl) can be checked without running them.
type fakeRunner struct {
	aliases map[string]bool
	cmds    [][]string
	stdin   map[string][]byte // by the joined command line
}

func (f *fakeRunner) Run(_ context.Context, stdin []byte, argv ...string) ([]byte, error) {
	f.cmds = append(f.cmds, argv)
	if stdin != nil {
		f.stdin[strings.Join(argv, " ")] = stdin
	}
	switch {
	case slices.Equal(argv, showArgv()):
		var b strings.Builder
		for ip := range f.aliases {
			b.WriteString("1: lo    inet " + ip + "/32 scope global lo\n")
		}
		return []byte(b.String()), nil
	case len(argv) > 3 && argv[1] == "addr" && argv[2] == "add":
		f.aliases[strings.TrimSuffix(argv[3], "/32")] = true
	case len(argv) > 3 && argv[1] == "addr" && argv[2] == "del":
		delete(f.aliases, strings.TrimSuffix(argv[3], "/32"))
	}
	return nil, nil
}

func (f *fakeRunner) commands() []string {
	var out []string
	for _, c := range f.cmds {
		if !slices.Equal(c, showArgv()) {
			out = append(out, strings.Join(c, " "))
		}
	}
	return out
}

func TestPersistSystemdUnit(t *testing.T) {
	const ip = "10.254.254.254"
	root := t.TempDir()
	f := &fakeRunner{aliases: map[string]bool{}, stdin: map[string][]byte{}}
	m := &Manager{Runner: f, Root: root, StatePath: filepath.Join(root, "state.json"), Privileged: true}
	ctx := context.Background()
	if err := m.Add(ctx, ip, true); err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(root, "etc/systemd/system/vmdock-loopback-alias.service")
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ExecStart=/sbin/ip addr replace 10.254.254.254/32 dev lo",
		"Type=oneshot", "RemainAfterExit=yes", "WantedBy=multi-user.target",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("unit lacks %q:\n%s", want, b)
		}
	}
	wantAdd := []string{
		"ip addr add 10.254.254.254/32 dev lo",
		"systemctl daemon-reload",
		"systemctl enable vmdock-loopback-alias.service",
	}
	if got := f.commands(); !reflect.DeepEqual(got, wantAdd) {
		t.Errorf("add commands = %q, want %q", got, wantAdd)
	}
	st, err := m.Status(ctx, ip)
	if err != nil || !st.Persisted || !st.Present || st.Recorded.PersistFile != persistPath {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	if err := m.Add(ctx, "10.254.254.1", true); err == nil || !strings.Contains(err.Error(), "already persisted") {
		t.Errorf("persisting a second IP: %v, want 'already persisted'", err)
	}
	if err := m.Remove(ctx, "10.254.254.1"); err != nil {
		t.Fatal(err)
	}

	f.cmds = nil
	if err := m.Remove(ctx, ip); err != nil {
		t.Fatal(err)
	}
	wantRemove := []string{
		"systemctl disable vmdock-loopback-alias.service",
		"systemctl daemon-reload",
		"ip addr del 10.254.254.254/32 dev lo",
	}
	if got := f.commands(); !reflect.DeepEqual(got, wantRemove) {
		t.Errorf("remove commands = %q, want %q", got, wantRemove)
	}
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Errorf("unit file left behind: %v", err)
	}
}

func TestPersistUnprivilegedGoesThroughRunner(t *testing.T) {
	root := t.TempDir()
	f := &fakeRunner{aliases: map[string]bool{DefaultIP: true}, stdin: map[string][]byte{}}
	m := &Manager{Runner: f, Root: root, StatePath: filepath.Join(root, "state.json")}
	ctx := context.Background()
	if err := m.Add(ctx, DefaultIP, true); err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(root, persistPath)
	want := []string{
		"tee " + unit,
		"chmod 0644 " + unit,
		"systemctl daemon-reload",
		"systemctl enable vmdock-loopback-alias.service",
	}
	if got := f.commands(); !reflect.DeepEqual(got, want) {
		t.Errorf("commands = %q, want %q (no `ip addr add`: the alias was already there)", got, want)
	}
	if !bytes.Equal(f.stdin["tee "+unit], persistContent(DefaultIP)) {
		t.Errorf("tee stdin = %q", f.stdin["tee "+unit])
	}
	f.cmds = nil
	if err := m.Remove(ctx, DefaultIP); err != nil {
		t.Fatal(err)
	}
	want = []string{"systemctl disable vmdock-loopback-alias.service", "rm -f " + unit, "systemctl daemon-reload"}
	if got := f.commands(); !reflect.DeepEqual(got, want) {
		t.Errorf("remove commands = %q, want %q", got, want)
	}
	if !f.aliases[DefaultIP] {
		t.Error("Remove deleted an alias it did not add")
	}
}
