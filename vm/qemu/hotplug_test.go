package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/driver"
)

// startRaw runs the paused test VM's argv with or without the scratch
// root ports (whether or not Args has them yet), and wraps it in a Machine
// that has just what the scratch methods use (spec, QMP, log, done).
func startRaw(t *testing.T, ports bool) *Machine {
	t.Helper()
	needQEMU(t)
	dir := shortDir(t)
	spec := pausedSpec(t, dir)
	spec.Shares = nil
	env, bin, err := pausedDriver().HostEnv(spec)
	if err != nil {
		t.Fatal(err)
	}
	env.Accel = AccelTCG
	all, err := Args(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for i := 0; i < len(all); i++ {
		if all[i] == "-device" && i+1 < len(all) && strings.Contains(all[i+1], "id=scratchport") {
			i++
			continue
		}
		args = append(args, all[i])
	}
	if ports {
		p, _ := scratchPortArgs()
		args = append(args, p...)
	}
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var q *qmp
	for {
		if q, err = dialQMP(ctx, QMPSocketPath(dir)); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("qemu exited: %s", stderr.String())
		case <-ctx.Done():
			t.Fatalf("qemu did not answer QMP: %v; stderr: %s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Cleanup(func() { q.Close() })
	return &Machine{spec: spec, qmp: q, log: slog.Default(), done: make(chan struct{})}
}

type blockInfo struct {
	Inserted struct {
		NodeName string `json:"node-name"`
		File     string `json:"file"`
		Cache    struct {
			Writeback bool `json:"writeback"`
			Direct    bool `json:"direct"`
			NoFlush   bool `json:"no-flush"`
		} `json:"cache"`
		DetectZeroes string `json:"detect_zeroes"`
	} `json:"inserted"`
	QDev string `json:"qdev"`
}

func queryScratch(t *testing.T, m *Machine, slot int) (blockInfo, bool) {
	t.Helper()
	var blocks []blockInfo
	if err := m.qmp.execute(context.Background(), "query-block", nil, &blocks); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if b.Inserted.NodeName == scratchNode(slot) {
			return b, true
		}
	}
	return blockInfo{}, false
}

func qomGet(t *testing.T, m *Machine, path, prop string) string {
	t.Helper()
	var v any
	if err := m.qmp.execute(context.Background(), "qom-get", map[string]any{"path": path, "property": prop}, &v); err != nil {
		t.Fatalf("qom-get %s %s: %v", path, prop, err)
	}
	return fmt.Sprint(v)
}

// The three --disk-sync modes land in one VM with the flush behaviour the
// boot disks get: full and fsync flush to the host, none drops flushes;
// all three show the guest a write cache, as -drive cache=writeback does.
func TestAttachScratchCacheModesInOneVM(t *testing.T) {
	m := startRaw(t, true)
	ctx := context.Background()
	modes := []string{driver.DiskSyncNone, driver.DiskSyncFsync, driver.DiskSyncFull}
	for slot, mode := range modes {
		serial, err := m.AttachScratch(ctx, slot, mode)
		if err != nil {
			t.Fatalf("AttachScratch(%d, %s): %v", slot, mode, err)
		}
		if serial != ScratchSerial(slot) {
			t.Errorf("serial = %q, want %q", serial, ScratchSerial(slot))
		}
	}
	for slot, mode := range modes {
		b, ok := queryScratch(t, m, slot)
		if !ok {
			t.Fatalf("slot %d (%s): no block node %s", slot, mode, scratchNode(slot))
		}
		c := b.Inserted.Cache
		if c.NoFlush != (mode == driver.DiskSyncNone) || c.Direct || !c.Writeback {
			t.Errorf("slot %d (%s): cache = %+v", slot, mode, c)
		}
		if b.Inserted.File != ScratchPath(m.spec.Dir, slot) || b.Inserted.DetectZeroes != "unmap" {
			t.Errorf("slot %d: file %q detect-zeroes %q", slot, b.Inserted.File, b.Inserted.DetectZeroes)
		}
		dev := "/machine/peripheral/" + scratchDevice(slot)
		if got := qomGet(t, m, dev, "serial"); got != ScratchSerial(slot) {
			t.Errorf("slot %d: device serial %q", slot, got)
		}
		if got := qomGet(t, m, dev, "write-cache"); got != "on" {
			t.Errorf("slot %d: write-cache %q, want on", slot, got)
		}
		if !strings.Contains(qomGet(t, m, dev, "parent_bus"), scratchPortID(slot)) {
			t.Errorf("slot %d: not on root port %s", slot, scratchPortID(slot))
		}
		st, err := os.Stat(ScratchPath(m.spec.Dir, slot))
		if err != nil || st.Size() != ScratchSize {
			t.Errorf("slot %d: scratch file %v %v", slot, st, err)
		}
	}
}

func TestAttachScratchRejectsBadInputAndChangesNothing(t *testing.T) {
	m := startRaw(t, true)
	ctx := context.Background()
	for _, c := range []struct {
		slot int
		sync string
		want string
	}{
		{ScratchSlots, driver.DiskSyncFsync, "scratch slot 3: accepted are 0 to 2"},
		{-1, driver.DiskSyncFsync, "scratch slot -1"},
		{0, "sometimes", `disk sync "sometimes": accepted values are full, fsync and none`},
	} {
		_, err := m.AttachScratch(ctx, c.slot, c.sync)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AttachScratch(%d, %q) = %v; want %q", c.slot, c.sync, err, c.want)
		}
	}
	if _, ok := queryScratch(t, m, 0); ok {
		t.Error("a refused attach left a block node")
	}
	if left, _ := filepath.Glob(filepath.Join(m.spec.Dir, "scratch*.raw")); len(left) > 0 {
		t.Errorf("a refused attach left files: %q", left)
	}
}

// Without the root ports (a VM booted before they existed) the attach
// fails with QEMU's reason and leaves neither node nor file behind.
func TestAttachScratchWithoutPortCleansUp(t *testing.T) {
	m := startRaw(t, false)
	_, err := m.AttachScratch(context.Background(), 1, driver.DiskSyncNone)
	if err == nil || !strings.Contains(err.Error(), "attach scratch disk 1 (disk-sync none)") {
		t.Fatalf("AttachScratch without a port = %v", err)
	}
	if _, ok := queryScratch(t, m, 1); ok {
		t.Error("failed attach left the block node")
	}
	if _, err := os.Stat(ScratchPath(m.spec.Dir, 1)); !os.IsNotExist(err) {
		t.Errorf("failed attach left the file: %v", err)
	}
}

func TestScratchPortArgs(t *testing.T) {
	got, err := scratchPortArgs()
	want := []string{
		"-device", "pcie-root-port,id=scratchport0,chassis=64,slot=0",
		"-device", "pcie-root-port,id=scratchport1,chassis=65,slot=0",
		"-device", "pcie-root-port,id=scratchport2,chassis=66,slot=0",
	}
	if !slices.Equal(got, want) || err != nil {
		t.Errorf("scratchPortArgs() = %q, %v", got, err)
	}
}

// fakeQMP behaves like QEMU's monitor: one client at a time (a new one
// once the last hung up), replies carrying the command's id, and a run
// state that stop and cont change as soon as they arrive, whether or not
// the client reads the reply (query-status reports it). Each command is
// answered with the next scripted reply for it, if any, and records the
// order of the commands. A reply of hangUp closes the connection instead,
// as QEMU does after quit; onCommand, when set (startFakeQMPWith), is
// called with each command before its reply, and may hold the reply back.
type fakeQMP struct {
	mu        sync.Mutex
	replies   map[string][]string // command -> raw replies, last one repeats
	paused    bool
	conns     int         // connections accepted
	noID      bool        // a command came without an id
	seen      chan string // each command with its JSON arguments
	onCommand func(string)
}

const hangUp = ""

func startFakeQMP(t *testing.T, replies map[string][]string) (*Machine, *fakeQMP) {
	t.Helper()
	return startFakeQMPWith(t, replies, nil)
}

// startFakeQMPWith is startFakeQMP with onCommand set before it serves.
func startFakeQMPWith(t *testing.T, replies map[string][]string, onCommand func(string)) (*Machine, *fakeQMP) {
	t.Helper()
	dir := shortDir(t)
	sock := filepath.Join(dir, "qmp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &fakeQMP{replies: replies, seen: make(chan string, 1000), onCommand: onCommand}
	go f.serve(ln)
	q, err := dialQMP(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	spec := driver.Spec{Dir: dir}
	return &Machine{spec: spec, qmp: q, log: slog.Default(), done: make(chan struct{})}, f
}

func (f *fakeQMP) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns++
		f.mu.Unlock()
		f.session(c)
	}
}

func (f *fakeQMP) session(c net.Conn) {
	defer c.Close()
	fmt.Fprintln(c, `{"QMP": {"version": {}, "capabilities": []}}`)
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		var req struct {
			Execute   string          `json:"execute"`
			Arguments json.RawMessage `json:"arguments"`
			ID        json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(sc.Bytes(), &req)
		f.seen <- strings.TrimSpace(req.Execute + " " + string(req.Arguments))
		reply := f.answer(req.Execute, req.ID == nil)
		if f.onCommand != nil {
			f.onCommand(req.Execute)
		}
		if reply == hangUp {
			return
		}
		fmt.Fprintln(c, withID(reply, req.ID))
	}
}

// answer is the reply to cmd; stop and cont take effect here, before the
// reply is sent, as in QEMU.
func (f *fakeQMP) answer(cmd string, noID bool) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noID = f.noID || (noID && cmd != "qmp_capabilities")
	reply := `{"return": {}}`
	if cmd == "query-status" {
		reply = fmt.Sprintf(`{"return": {"status": %q, "running": %v}}`, map[bool]string{true: "paused", false: "running"}[f.paused], !f.paused)
	}
	if rs := f.replies[cmd]; len(rs) > 0 {
		reply = rs[0]
		if len(rs) > 1 {
			f.replies[cmd] = rs[1:]
		}
	}
	if strings.Contains(reply, `"return"`) {
		switch cmd {
		case "stop":
			f.paused = true
		case "cont":
			f.paused = false
		}
	}
	return reply
}

// withID puts the command's id into its reply (the last line of a
// scripted reply; lines before it are sent as they are), as QEMU does.
func withID(reply string, id json.RawMessage) string {
	before, last := "", reply
	if i := strings.LastIndex(reply, "\n"); i >= 0 {
		before, last = reply[:i+1], reply[i+1:]
	}
	var m map[string]json.RawMessage
	if id == nil || json.Unmarshal([]byte(last), &m) != nil {
		return reply
	}
	m["id"] = id
	b, _ := json.Marshal(m)
	return before + string(b)
}

// commands drains the names of the commands seen so far.
func (f *fakeQMP) commands() []string {
	var out []string
	for _, c := range f.commandsWithArgs() {
		name, _, _ := strings.Cut(c, " ")
		out = append(out, name)
	}
	return out
}

// commandsWithArgs drains the commands seen so far, with their arguments.
func (f *fakeQMP) commandsWithArgs() []string {
	var out []string
	for {
		select {
		case c := <-f.seen:
			if c != "qmp_capabilities" {
				out = append(out, c)
			}
		default:
			return out
		}
	}
}

const nodeInUse = `{"error": {"class": "GenericError", "desc": "Node scratch0 is in use"}}`

// Detach waits for the guest to let go: blockdev-del is retried while
// QEMU says the node is in use, then the file goes.
func TestDetachScratchWaitsForTheGuest(t *testing.T) {
	m, f := startFakeQMP(t, map[string][]string{
		"blockdev-del": {nodeInUse, nodeInUse, `{"return": {}}`},
	})
	path := ScratchPath(m.spec.Dir, 0)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.DetachScratch(context.Background(), 0); err != nil {
		t.Fatalf("DetachScratch: %v", err)
	}
	want := []string{"device_del", "blockdev-del", "blockdev-del", "blockdev-del"}
	if got := f.commands(); !slices.Equal(got, want) {
		t.Errorf("QMP commands = %q, want %q", got, want)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("scratch file still there: %v", err)
	}
}

// An empty slot (nothing attached, or an unplug already under way from an
// earlier run) detaches without error.
func TestDetachScratchEmptySlot(t *testing.T) {
	for _, devDel := range []string{
		`{"error": {"class": "DeviceNotFound", "desc": "Device 'scratchdev0' not found"}}`,
		`{"error": {"class": "GenericError", "desc": "Device scratchdev0 is already in the process of unplug"}}`,
	} {
		m, f := startFakeQMP(t, map[string][]string{
			"device_del":   {devDel},
			"blockdev-del": {`{"error": {"class": "GenericError", "desc": "Failed to find node with node-name='scratch0'"}}`},
		})
		if err := m.DetachScratch(context.Background(), 0); err != nil {
			t.Errorf("DetachScratch after %s: %v", devDel, err)
		}
		if got := f.commands(); !slices.Equal(got, []string{"device_del", "blockdev-del"}) {
			t.Errorf("QMP commands = %q", got)
		}
	}
}

// A guest that never releases the disk (still mounted) fails the detach
// within the timeout, naming the likely reason, and keeps the file.
func TestDetachScratchGivesUp(t *testing.T) {
	old := scratchDetachTimeout
	scratchDetachTimeout = 700 * time.Millisecond
	t.Cleanup(func() { scratchDetachTimeout = old })
	m, _ := startFakeQMP(t, map[string][]string{"blockdev-del": {nodeInUse}})
	path := ScratchPath(m.spec.Dir, 0)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	err := m.DetachScratch(context.Background(), 0)
	if err == nil || !strings.Contains(err.Error(), "still mounted?") {
		t.Fatalf("DetachScratch = %v", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("gave up after %s", d)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("file of a disk still attached was removed: %v", err)
	}
}

// Another device_del failure is QEMU's reason, not a wait.
func TestDetachScratchOtherError(t *testing.T) {
	m, f := startFakeQMP(t, map[string][]string{
		"device_del": {`{"error": {"class": "GenericError", "desc": "Bus does not support hot-unplug"}}`},
	})
	err := m.DetachScratch(context.Background(), 0)
	if err == nil || !strings.Contains(err.Error(), "Bus does not support hot-unplug") {
		t.Fatalf("DetachScratch = %v", err)
	}
	if got := f.commands(); !slices.Equal(got, []string{"device_del"}) {
		t.Errorf("QMP commands = %q", got)
	}
}

// replies of an empty slot: nothing to unplug, no node to delete.
func emptySlotReplies() map[string][]string {
	return map[string][]string{
		"device_del":   {`{"error": {"class": "DeviceNotFound", "desc": "Device 'scratchdev1' not found"}}`},
		"blockdev-del": {`{"error": {"class": "GenericError", "desc": "Failed to find node with node-name='scratch1'"}}`},
	}
}

// Attach empties the slot, makes the file (all hole), then adds the node
// over that file and the device with the slot's serial on its port.
func TestAttachScratchSequence(t *testing.T) {
	m, f := startFakeQMP(t, emptySlotReplies())
	serial, err := m.AttachScratch(context.Background(), 1, driver.DiskSyncNone)
	if err != nil || serial != "vmdock-scratch1" {
		t.Fatalf("AttachScratch = %q, %v", serial, err)
	}
	path := ScratchPath(m.spec.Dir, 1)
	calls := f.commandsWithArgs()
	if len(calls) != 4 {
		t.Fatalf("QMP commands = %q, want device_del, blockdev-del, blockdev-add, device_add", calls)
	}
	for i, want := range []string{"device_del ", "blockdev-del ", "blockdev-add ", "device_add "} {
		if !strings.HasPrefix(calls[i], want) {
			t.Fatalf("QMP commands = %q, want device_del, blockdev-del, blockdev-add, device_add", calls)
		}
	}
	for _, want := range []string{`"filename":"` + path + `"`, `"node-name":"scratch1"`, `"no-flush":true`} {
		if !strings.Contains(calls[2], want) {
			t.Errorf("blockdev-add %s: missing %s", calls[2], want)
		}
	}
	for _, want := range []string{`"bus":"scratchport1"`, `"serial":"vmdock-scratch1"`, `"drive":"scratch1"`, `"write-cache":"on"`} {
		if !strings.Contains(calls[3], want) {
			t.Errorf("device_add %s: missing %s", calls[3], want)
		}
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != ScratchSize || st.Mode().Perm() != 0o600 {
		t.Fatalf("scratch file: %v, %v; want %d bytes, mode 0600", st, err, ScratchSize)
	}
	if blocks := st.Sys().(*syscall.Stat_t).Blocks; blocks != 0 {
		t.Errorf("scratch file has %d blocks allocated; want a sparse file", blocks)
	}
}

// A file that cannot be made fails the attach before QEMU is asked to
// open it.
func TestAttachScratchFileNotMade(t *testing.T) {
	m, f := startFakeQMP(t, emptySlotReplies())
	m.spec.Dir = filepath.Join(m.spec.Dir, "gone")
	_, err := m.AttachScratch(context.Background(), 1, driver.DiskSyncFsync)
	if err == nil || !strings.Contains(err.Error(), "create scratch disk "+ScratchPath(m.spec.Dir, 1)) {
		t.Fatalf("AttachScratch in a missing folder = %v", err)
	}
	if got := f.commands(); !slices.Equal(got, []string{"device_del", "blockdev-del"}) {
		t.Errorf("QMP commands = %q; want no blockdev-add", got)
	}
}

// A refused device_add takes the node back out and removes the file.
func TestAttachScratchDeviceRefused(t *testing.T) {
	replies := emptySlotReplies()
	replies["device_add"] = []string{`{"error": {"class": "GenericError", "desc": "Bus 'scratchport1' not found"}}`}
	m, f := startFakeQMP(t, replies)
	_, err := m.AttachScratch(context.Background(), 1, driver.DiskSyncFull)
	if err == nil || !strings.Contains(err.Error(), "attach scratch disk 1 (disk-sync full)") || !strings.Contains(err.Error(), "Bus 'scratchport1' not found") {
		t.Fatalf("AttachScratch = %v", err)
	}
	want := []string{"device_del", "blockdev-del", "blockdev-add", "device_add", "blockdev-del"}
	if got := f.commands(); !slices.Equal(got, want) {
		t.Errorf("QMP commands = %q, want %q", got, want)
	}
	if _, err := os.Stat(ScratchPath(m.spec.Dir, 1)); !os.IsNotExist(err) {
		t.Errorf("refused attach left the file: %v", err)
	}
}

func TestScratchOnAStoppedVM(t *testing.T) {
	m, f := startFakeQMP(t, nil)
	close(m.done)
	if _, err := m.AttachScratch(context.Background(), 0, driver.DiskSyncFsync); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("AttachScratch after the VM ended = %v", err)
	}
	if got := f.commands(); len(got) != 0 {
		t.Errorf("QMP commands to an ended VM: %q", got)
	}
	if left, _ := filepath.Glob(filepath.Join(m.spec.Dir, "scratch*")); len(left) != 0 {
		t.Errorf("files made for an ended VM: %q", left)
	}
}
