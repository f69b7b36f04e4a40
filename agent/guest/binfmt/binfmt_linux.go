package binfmt

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vmdock/vmdock/agent/guest/guestos"
)

// Where the formats the guest registers at boot are declared:
// update-binfmts' database (one file per format, named after it) and the
// packages' binfmt.d(5) files that systemd-binfmt reads.
// Handlers registers the binfmt handlers that run foreign binaries:
// qemu-user-static's, and Rosetta's on Apple silicon.
type Handlers struct {
	guestos.Sys
}

// binfmtMisc is where the kernel lists its binfmt handlers.
const binfmtMisc = "/proc/sys/fs/binfmt_misc"

const (
	binfmtsAdminDir = "/var/lib/binfmts"
	binfmtDPackages = "/usr/lib/binfmt.d"
)

// binfmtRule is one binfmt_misc registration of the magic type: files whose
// first len(Magic) bytes, ANDed with Mask, equal Magic run through
// Interpreter.
type binfmtRule struct {
	Name        string
	Magic       []byte
	Mask        []byte
	Interpreter string
	Flags       string
}

// line is the registration as /proc/sys/fs/binfmt_misc/register and
// binfmt.d(5) both take it, bytes written as \xHH.
func (r binfmtRule) line() string {
	return ":" + r.Name + ":M::" + escapeBinfmt(r.Magic) + ":" + escapeBinfmt(r.Mask) + ":" + r.Interpreter + ":" + r.Flags
}

// confFile is the rule as a binfmt.d(5) file.
func (r binfmtRule) confFile() []byte {
	return []byte("# Written by the vmdock guest agent at every boot: " + r.Name + " runs x86_64 binaries.\n" + r.line() + "\n")
}

// matches reports whether the kernel would hand a file starting with head
// to this rule.
func (r binfmtRule) matches(head []byte) bool {
	if len(head) < len(r.Magic) || len(r.Mask) != len(r.Magic) {
		return false
	}
	for i := range r.Magic {
		if (head[i]^r.Magic[i])&r.Mask[i] != 0 {
			return false
		}
	}
	return true
}

// escapeBinfmt writes letters and digits as themselves (so "\x7fELF"
// reads as it always did) and every other byte as \xHH: the kernel reads
// exactly two hex digits after \x, and ':' would end the field.
func escapeBinfmt(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			sb.WriteByte(c)
			continue
		}
		fmt.Fprintf(&sb, `\x%02x`, c)
	}
	return sb.String()
}

// x86_64 ELF executables and shared objects: the magic/mask pair Apple
// documents for Rosetta, the same qemu-user uses for qemu-x86_64.
var (
	x8664ELFMagic = []byte{0x7f, 'E', 'L', 'F', 0x02, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x3e, 0x00}
	x8664ELFMask  = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0xfe, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff}
)

// rosettaRule registers x86_64 ELF with Rosetta. O and C let setuid
// binaries keep their credentials; F makes the kernel open the interpreter
// now, so it also works inside containers that do not see rosettaDir.
func rosettaRule() binfmtRule {
	return binfmtRule{Name: "rosetta", Magic: x8664ELFMagic, Mask: x8664ELFMask, Interpreter: rosettaDir + "/rosetta", Flags: "OCF"}
}

// binfmtEntry is a registration as the kernel shows it in
// /proc/sys/fs/binfmt_misc/<name>.
type binfmtEntry struct {
	Enabled bool
	Offset  int
	Magic   []byte
	Mask    []byte // nil: every bit counts
}

// parseBinfmtEntry reads an entry file ("enabled", "interpreter ...",
// "flags: OCF", "offset 0", "magic 7f45...", "mask ffff..."). Extension
// entries have no magic line and match nothing here.
func parseBinfmtEntry(text string) (binfmtEntry, error) {
	var e binfmtEntry
	for _, l := range strings.Split(text, "\n") {
		key, val, _ := strings.Cut(strings.TrimSpace(l), " ")
		var err error
		switch key {
		case "enabled":
			e.Enabled = true
		case "offset":
			_, err = fmt.Sscanf(val, "%d", &e.Offset)
		case "magic":
			e.Magic, err = hex.DecodeString(val)
		case "mask":
			e.Mask, err = hex.DecodeString(val)
		}
		if err != nil {
			return binfmtEntry{}, fmt.Errorf("binfmt_misc entry line %q: %w", l, err)
		}
	}
	return e, nil
}

// claims reports whether the entry, when enabled, takes a file starting
// with head.
func (e binfmtEntry) claims(head []byte) bool {
	if !e.Enabled || len(e.Magic) == 0 || len(head) < e.Offset+len(e.Magic) {
		return false
	}
	mask := e.Mask
	if mask == nil {
		mask = bytes.Repeat([]byte{0xff}, len(e.Magic))
	}
	return binfmtRule{Magic: e.Magic, Mask: mask}.matches(head[e.Offset:])
}

// binfmtsRegistered reports whether every format update-binfmts and the
// packages' binfmt.d files declare is registered and enabled in
// binfmt_misc, and names them. With no format declared at all, or one
// missing or disabled, it says no, and update-binfmts runs as it always
// did.
func (s *Handlers) binfmtsRegistered() ([]string, bool) {
	names := s.declaredBinfmts()
	if len(names) == 0 {
		return nil, false
	}
	for _, n := range names {
		b, err := os.ReadFile(s.Path(filepath.Join(binfmtMisc, n)))
		if err != nil {
			return nil, false
		}
		if first, _, _ := strings.Cut(string(b), "\n"); strings.TrimSpace(first) != "enabled" {
			return nil, false
		}
	}
	return names, true
}

// binfmtsOnlyFromBinfmtD reports whether every format comes from the
// packages' binfmt.d files (update-binfmts' database is empty), which
// systemd-binfmt registers.
func (s *Handlers) binfmtsOnlyFromBinfmtD() bool {
	if des, err := os.ReadDir(s.Path(binfmtsAdminDir)); err == nil && len(des) > 0 {
		return false
	}
	confs, _ := filepath.Glob(filepath.Join(s.Path(binfmtDPackages), "*.conf"))
	return len(confs) > 0
}

// declaredBinfmts are the format names of update-binfmts' database and of
// the packages' binfmt.d files, sorted, each once.
func (s *Handlers) declaredBinfmts() []string {
	seen := map[string]bool{}
	if des, err := os.ReadDir(s.Path(binfmtsAdminDir)); err == nil {
		for _, de := range des {
			if de.Type().IsRegular() {
				seen[de.Name()] = true
			}
		}
	}
	confs, _ := filepath.Glob(filepath.Join(s.Path(binfmtDPackages), "*.conf"))
	for _, c := range confs {
		b, err := os.ReadFile(c)
		if err != nil {
			continue
		}
		for _, n := range binfmtDNames(string(b)) {
			seen[n] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// binfmtDNames are the names a binfmt.d(5) file registers: each rule line
// starts with its delimiter, the name comes next. Empty lines and those
// starting with # or ; are comments.
func binfmtDNames(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if len(l) < 2 || l[0] == '#' || l[0] == ';' {
			continue
		}
		// A name with a slash could not be registered; "." and ".." would
		// name the folder, not an entry.
		if name, _, ok := strings.Cut(l[1:], l[:1]); ok && name != "" && name != "." && name != ".." && !strings.Contains(name, "/") {
			out = append(out, name)
		}
	}
	return out
}

// EnableQEMU enables qemu-user-static's handlers so foreign-arch images run.
// The boot has usually registered them already (systemd-binfmt from
// binfmt.d, binfmt-support's own unit with update-binfmts), and then
// nothing runs: update-binfmts is a process that reads every format file,
// about a second under TCG to find it has nothing to do.
func (s *Handlers) EnableQEMU(ctx context.Context) error {
	if s.binfmtsOnlyFromBinfmtD() {
		// The agent starts before the boot's systemd-binfmt (pulled in
		// by sysinit.target) has run; it registers these formats, and
		// nothing before docker is ready needs a foreign binary. Not
		// even a look at binfmt_misc: the boot mounts it on first
		// access, which waits seconds for systemd under TCG.
		s.Logger().Debug("binfmt handlers come from binfmt.d; the boot's systemd-binfmt registers them")
		return nil
	}
	if names, ok := s.binfmtsRegistered(); ok {
		s.Logger().Debug("binfmt handlers registered at boot", "formats", names)
		return nil
	}
	_, err := s.OS.Run(ctx, "update-binfmts", "--enable")
	if err == nil {
		return nil
	}
	if _, err2 := s.OS.Run(ctx, "systemctl", "restart", "systemd-binfmt"); err2 != nil {
		return errors.Join(err, err2)
	}
	return nil
}
