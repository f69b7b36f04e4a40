package binfmt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

// The registration the guest always wrote (magic, mask and flags as Apple
// documents for Rosetta); the binfmt.d file must not change it.
const legacyRosettaRegistration = `:rosetta:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00:\xff\xff\xff\xff\xff\xfe\xfe\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/mnt/rosetta/rosetta:OCF`

// qemuX8664Line is Debian's /usr/lib/binfmt.d/qemu-x86_64.conf.
const qemuX8664Line = `:qemu-x86_64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00:\xff\xff\xff\xff\xff\xfe\xfe\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/libexec/qemu-binfmt/x86_64-binfmt-P:POCF`

func TestRosettaRegistration(t *testing.T) {
	r := rosettaRule()
	if got := r.line(); got != legacyRosettaRegistration {
		t.Errorf("registration changed:\n got %s\nwant %s", got, legacyRosettaRegistration)
	}
	// The file holds exactly that registration: binfmt.d(5) skips empty
	// lines and those starting with # or ;.
	rules := binfmtDRules(string(r.confFile()))
	if len(rules) != 1 || rules[0] != legacyRosettaRegistration {
		t.Errorf("binfmt.d file registers %q", rules)
	}
	if !strings.HasSuffix(string(r.confFile()), "\n") {
		t.Error("binfmt.d file does not end in a newline")
	}
}

func TestRosettaRuleMatchesX8664Only(t *testing.T) {
	r := rosettaRule()
	x86 := append([]byte{}, x8664ELFMagic...)
	x86shared := append([]byte{}, x86...)
	x86shared[16] = 0x03 // ET_DYN: PIE executables and shared objects
	arm64 := append([]byte{}, x86...)
	arm64[18] = 0xb7 // EM_AARCH64
	for name, tc := range map[string]struct {
		head []byte
		want bool
	}{"x86_64 exec": {x86, true}, "x86_64 PIE": {x86shared, true}, "arm64": {arm64, false}, "short": {x86[:8], false}} {
		if got := r.matches(tc.head); got != tc.want {
			t.Errorf("%s: matches = %v, want %v", name, got, tc.want)
		}
	}
}

// binfmtMiscSim models the kernel's registration list: register inserts
// at the head, a name registered twice is EEXIST, and exec takes the first
// matching entry from the head, so the newest registration wins.
type binfmtMiscSim struct{ entries []binfmtRule }

func (k *binfmtMiscSim) register(line string) error {
	r, err := parseRuleLine(line)
	if err != nil {
		return err
	}
	for _, e := range k.entries {
		if e.Name == r.Name {
			return errors.New("EEXIST")
		}
	}
	k.entries = append([]binfmtRule{r}, k.entries...)
	return nil
}

func (k *binfmtMiscSim) handler(head []byte) string {
	for _, e := range k.entries {
		if e.matches(head) {
			return e.Name
		}
	}
	return ""
}

// systemdBinfmtRestart models `systemctl restart systemd-binfmt`: flush
// every registration, then apply *.conf files sorted by file name across
// folders, a name in /etc hiding the same in /run and /usr/lib.
func (k *binfmtMiscSim) systemdBinfmtRestart(files map[string]string) {
	k.entries = nil
	rank := map[string]int{"/etc/binfmt.d": 0, "/run/binfmt.d": 1, "/usr/lib/binfmt.d": 2}
	chosen := map[string]string{}
	for p := range files {
		base := filepath.Base(p)
		if cur, ok := chosen[base]; !ok || rank[filepath.Dir(p)] < rank[filepath.Dir(cur)] {
			chosen[base] = p
		}
	}
	names := make([]string, 0, len(chosen))
	for n := range chosen {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, l := range binfmtDRules(files[chosen[n]]) {
			_ = k.register(l)
		}
	}
}

func binfmtDRules(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && l[0] != '#' && l[0] != ';' {
			out = append(out, l)
		}
	}
	return out
}

// parseRuleLine reads ":name:M::magic:mask:interp:flags" with \xHH escapes.
func parseRuleLine(line string) (binfmtRule, error) {
	f := strings.Split(line, ":")
	if len(f) != 8 || f[2] != "M" {
		return binfmtRule{}, errors.New("not a magic rule: " + line)
	}
	unescape := func(s string) []byte {
		var b []byte
		for i := 0; i < len(s); i++ {
			if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
				var v byte
				for _, c := range s[i+2 : i+4] {
					v = v*16 + byte(strings.IndexRune("0123456789abcdef", c|0x20))
				}
				b = append(b, v)
				i += 3
				continue
			}
			b = append(b, s[i])
		}
		return b
	}
	return binfmtRule{Name: f[1], Magic: unescape(f[4]), Mask: unescape(f[5]), Interpreter: f[6], Flags: f[7]}, nil
}

// Priority is registration order, newest first: registering Rosetta before
// qemu-x86_64 (qemu-user-static installed later) hands amd64 to qemu.
func TestBinfmtNewestRegistrationWins(t *testing.T) {
	var k binfmtMiscSim
	must(t, k.register(rosettaRule().line()))
	must(t, k.register(qemuX8664Line))
	if got := k.handler(x8664ELFMagic); got != "qemu-x86_64" {
		t.Fatalf("handler = %q, want qemu-x86_64 (the newest)", got)
	}
	if err := k.register(rosettaRule().line()); err == nil {
		t.Error("registering a name twice succeeded; the kernel refuses it (EEXIST)")
	}
}

// After a systemd-binfmt restart, with qemu-user-static's file in
// /usr/lib/binfmt.d, Rosetta still runs x86_64 binaries: our file's name
// sorts last, so it registers last.
func TestRosettaKeepsPriorityAfterSystemdBinfmtRestart(t *testing.T) {
	files := map[string]string{
		"/usr/lib/binfmt.d/qemu-x86_64.conf":    qemuX8664Line + "\n",
		"/usr/lib/binfmt.d/qemu-aarch64.conf":   "# not ours\n",
		binfmtConfDir + "/" + rosettaBinfmtConf: string(rosettaRule().confFile()),
	}
	var k binfmtMiscSim
	k.systemdBinfmtRestart(files)
	if got := k.handler(x8664ELFMagic); got != "rosetta" {
		t.Errorf("after restart x86_64 runs through %q, want rosetta", got)
	}
	// The name is what wins it: the same file sorted before qemu's loses.
	delete(files, binfmtConfDir+"/"+rosettaBinfmtConf)
	files[binfmtConfDir+"/00-rosetta.conf"] = string(rosettaRule().confFile())
	k.systemdBinfmtRestart(files)
	if got := k.handler(x8664ELFMagic); got != "qemu-x86_64" {
		t.Errorf("control: a file sorted first still wins (%q); the model is wrong", got)
	}
	for _, q := range []string{"qemu-x86_64.conf", "qemu-x86_64-static.conf", "qemu-i386.conf", "box64.conf"} {
		if rosettaBinfmtConf <= q {
			t.Errorf("%s does not sort after %s", rosettaBinfmtConf, q)
		}
	}
}

func TestParseBinfmtEntry(t *testing.T) {
	qemu := "enabled\ninterpreter /usr/libexec/qemu-binfmt/x86_64-binfmt-P\nflags: POCF\noffset 0\nmagic 7f454c4602010100000000000000000002003e00\nmask fffffffffffefe00fffffffffffffffffeffffff\n"
	e, err := parseBinfmtEntry(qemu)
	if err != nil {
		t.Fatal(err)
	}
	if !e.claims(x8664ELFMagic) {
		t.Errorf("qemu-x86_64 entry %+v does not claim x86_64 ELF", e)
	}
	disabled, _ := parseBinfmtEntry(strings.Replace(qemu, "enabled", "disabled", 1))
	if disabled.claims(x8664ELFMagic) {
		t.Error("a disabled entry claims files")
	}
	arm, _ := parseBinfmtEntry("enabled\ninterpreter /usr/bin/qemu-aarch64\nflags: F\noffset 0\nmagic 7f454c460201010000000000000000000200b700\nmask ffffffffffffff00fffffffffffffffffeffffff\n")
	if arm.claims(x8664ELFMagic) {
		t.Error("the aarch64 entry claims x86_64 files")
	}
	ext, _ := parseBinfmtEntry("enabled\ninterpreter /usr/bin/wine\nflags: \nextension .exe\n")
	if ext.claims(x8664ELFMagic) {
		t.Error("an extension entry claims x86_64 files")
	}
	if _, err := parseBinfmtEntry("enabled\nmagic zz\n"); err == nil {
		t.Error("bad hex accepted")
	}
}

// binfmt falls back to systemd-binfmt when update-binfmts fails, and
// reports both failures when neither works.
func TestBinfmt(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, s.EnableQEMU(context.Background()))
	if got := fos.Ran(); got != "update-binfmts --enable" {
		t.Fatalf("ran %q", got)
	}

	s, fos = newTestServer(t)
	fos.Results = map[string]error{"update-binfmts": guestostest.ExitErr(2)}
	must(t, s.EnableQEMU(context.Background()))
	if got := fos.Ran(); got != "update-binfmts --enable\nsystemctl restart systemd-binfmt" {
		t.Fatalf("ran %q, want the systemd-binfmt fallback", got)
	}

	s, fos = newTestServer(t)
	fos.Results = map[string]error{"update-binfmts": guestostest.ExitErr(2), "systemctl": guestostest.ExitErr(5)}
	err := s.EnableQEMU(context.Background())
	if err == nil || !strings.Contains(err.Error(), "exit status 2") || !strings.Contains(err.Error(), "exit status 5") {
		t.Fatalf("both failing: %v; want both reasons", err)
	}
}

// With every format in binfmt.d (qemu-user-static in trixie) and the boot's
// systemd-binfmt not run yet (the agent starts first), binfmt leaves them to
// it: no update-binfmts with nothing to enable, no systemctl call.
func TestBinfmtStartsSystemdBinfmtForBinfmtDFormats(t *testing.T) {
	s, fos := newTestServer(t)
	confs := filepath.Join(s.Root, binfmtDPackages)
	must(t, os.MkdirAll(confs, 0o755))
	must(t, os.MkdirAll(filepath.Join(s.Root, binfmtsAdminDir), 0o755))
	must(t, os.WriteFile(filepath.Join(confs, "qemu-x86_64.conf"), []byte(qemuX8664Line+"\n"), 0o644))
	must(t, s.EnableQEMU(context.Background()))
	if got := fos.Ran(); got != "" {
		t.Fatalf("ran %q, want nothing (systemd-binfmt is part of the boot)", got)
	}
}

// binfmt runs nothing when the boot registered and enabled every format
// update-binfmts' database and the packages' binfmt.d files declare, and
// runs update-binfmts as before when one is missing or disabled.
func TestBinfmtSkipsWhatTheBootRegistered(t *testing.T) {
	s, fos := newTestServer(t)
	admin := filepath.Join(s.Root, binfmtsAdminDir)
	confs := filepath.Join(s.Root, binfmtDPackages)
	misc := filepath.Join(s.Root, binfmtMisc)
	for _, d := range []string{admin, confs, misc} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(admin, "qemu-aarch64"), []byte("qemu-user-static\nmagic\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(confs, "qemu-x86_64.conf"), []byte("# comment\n; another\n\n"+qemuX8664Line+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(confs, "qemu-riscv64.conf"), []byte(",qemu-riscv64,M,,\\x7fELF,\\xff,/usr/bin/qemu-riscv64,F\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(confs, "not-a-conf.txt"), []byte(":qemu-ignored:M::x::/x:\n"), 0o644))
	entry := func(name, state string) {
		must(t, os.WriteFile(filepath.Join(misc, name), []byte(state+"\ninterpreter /usr/libexec/qemu-binfmt/x\nflags: POCF\n"), 0o644))
	}
	entry("qemu-aarch64", "enabled")
	entry("qemu-x86_64", "enabled")
	entry("qemu-riscv64", "enabled")

	if got := s.declaredBinfmts(); strings.Join(got, " ") != "qemu-aarch64 qemu-riscv64 qemu-x86_64" {
		t.Fatalf("declared formats %q", got)
	}
	must(t, s.EnableQEMU(context.Background()))
	if got := fos.Ran(); got != "" {
		t.Fatalf("every format registered, yet ran %q", got)
	}

	entry("qemu-riscv64", "disabled")
	must(t, s.EnableQEMU(context.Background()))
	if got := fos.Ran(); got != "update-binfmts --enable" {
		t.Fatalf("a disabled format ran %q, want update-binfmts", got)
	}

	fos.Cmds = nil
	entry("qemu-riscv64", "enabled")
	must(t, os.Remove(filepath.Join(misc, "qemu-aarch64")))
	must(t, s.EnableQEMU(context.Background()))
	if got := fos.Ran(); got != "update-binfmts --enable" {
		t.Fatalf("a missing format ran %q, want update-binfmts", got)
	}
}

func TestBinfmtDNames(t *testing.T) {
	text := "# c\n;c\n  :a:M::x::/i:F  \n|b|E::so::/i:\n:../x:M::x::/i:\n:c/d:M::x::/i:\n::M::x::/i:\n:\n"
	if got := strings.Join(binfmtDNames(text), " "); got != "a b" {
		t.Errorf("names %q, want \"a b\"", got)
	}
}
