package qemu

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"
)

// hostfwd rules come and go at run time on a real qemu, also under
// restrict=on: the host side listens while the rule exists.
func TestOpenAndClosePort(t *testing.T) {
	needQEMU(t)
	dir := shortDir(t)
	m := startPaused(t, savableSpec(t, dir))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, err := m.OpenPort(ctx, 80)
	if err != nil {
		t.Fatalf("OpenPort: %v", err)
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("nothing listens at %s after OpenPort: %v", addr, err)
	}
	c.Close()
	if err := m.ClosePort(ctx, 80); err != nil {
		t.Fatalf("ClosePort: %v", err)
	}
	if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still listens after ClosePort", addr)
	}
	if _, err := m.OpenPort(ctx, 70000); err == nil {
		t.Error("OpenPort accepted port 70000")
	}
}

// hmpReply is QEMU's answer to a human-monitor-command printing out.
func hmpReply(out string) string {
	b, _ := json.Marshal(map[string]string{"return": out})
	return string(b)
}

// A rule QEMU refuses is tried on three free ports, then reported with
// QEMU's words; nothing is remembered for ClosePort.
func TestOpenPortRefused(t *testing.T) {
	m, f := startFakeQMP(t, map[string][]string{
		"human-monitor-command": {hmpReply("Could not set up host forwarding rule 'tcp:127.0.0.1:1-:80'\r\n")},
	})
	_, err := m.OpenPort(context.Background(), 80)
	if err == nil || !strings.Contains(err.Error(), "hostfwd for guest port 80: qemu: Could not set up host forwarding rule") {
		t.Fatalf("OpenPort = %v", err)
	}
	if got := f.commands(); len(got) != 3 {
		t.Fatalf("QMP commands = %q, want three tries", got)
	}
	if err := m.ClosePort(context.Background(), 80); err != nil || len(f.commands()) != 0 {
		t.Fatalf("ClosePort of a port never opened: %v, sent %q", err, f.commands())
	}
}

// Opening a guest port again replaces its rule: the old host port is
// removed, and ClosePort removes the new one, reporting what QEMU says.
func TestOpenPortAgainReplacesTheRule(t *testing.T) {
	m, f := startFakeQMP(t, map[string][]string{
		"human-monitor-command": {
			hmpReply(""), hmpReply(""), // two hostfwd_add
			hmpReply("host forwarding rule for tcp:127.0.0.1 removed\r\n"), // the first rule goes
			hmpReply("invalid host forwarding rule\r\n"),                   // ClosePort
		},
	})
	ctx := context.Background()
	first, err := m.OpenPort(ctx, 80)
	if err != nil {
		t.Fatal(err)
	}
	second, err := m.OpenPort(ctx, 80)
	if err != nil {
		t.Fatal(err)
	}
	_, p1, _ := net.SplitHostPort(first)
	_, p2, _ := net.SplitHostPort(second)
	err = m.ClosePort(ctx, 80)
	if err == nil || err.Error() != "qemu: invalid host forwarding rule" {
		t.Fatalf("ClosePort = %v; want QEMU's words", err)
	}
	want := []string{
		`"hostfwd_add net0 tcp:127.0.0.1:` + p1 + `-:80"`,
		`"hostfwd_add net0 tcp:127.0.0.1:` + p2 + `-:80"`,
		`"hostfwd_remove net0 tcp:127.0.0.1:` + p1 + `"`,
		`"hostfwd_remove net0 tcp:127.0.0.1:` + p2 + `"`,
	}
	calls := f.commandsWithArgs()
	if len(calls) != len(want) {
		t.Fatalf("QMP commands = %q", calls)
	}
	for i, w := range want {
		if !strings.Contains(calls[i], w) {
			t.Errorf("command %d = %s, want %s", i, calls[i], w)
		}
	}
	if err := m.ClosePort(ctx, 80); err != nil || len(f.commands()) != 0 {
		t.Fatalf("second ClosePort: %v, sent %q", err, f.commands())
	}
}

func TestPortsOnAStoppedVM(t *testing.T) {
	m, f := startFakeQMP(t, map[string][]string{"human-monitor-command": {hmpReply("")}})
	if _, err := m.OpenPort(context.Background(), 80); err != nil {
		t.Fatal(err)
	}
	close(m.done)
	f.commands()
	if _, err := m.OpenPort(context.Background(), 81); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("OpenPort after the VM ended = %v", err)
	}
	if err := m.ClosePort(context.Background(), 80); err != nil {
		t.Fatalf("ClosePort after the VM ended = %v; its rules went with it", err)
	}
	if got := f.commands(); len(got) != 0 {
		t.Fatalf("QMP commands to an ended VM: %q", got)
	}
	if _, err := m.OpenPort(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "1-65535") {
		t.Fatalf("OpenPort(0) = %v", err)
	}
}
