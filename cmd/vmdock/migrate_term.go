package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vmdock/vmdock/vm/store"
)

// termSafe is text from an engine made safe to print: a source may name
// things, or answer errors, with terminal controls (cursor moves, an OSC
// 52 clipboard write), so control and format characters and invalid
// UTF-8 are shown escaped (\x1b, \u202e) instead.
func termSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x100 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.Is(unicode.Cf, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// termSafeError prints err's text through termSafe and keeps its chain.
type termSafeError struct{ err error }

func (e termSafeError) Error() string { return termSafe(e.err.Error()) }
func (e termSafeError) Unwrap() error { return e.err }

// termSafeJSON is encoded JSON with the controls encoding/json leaves raw
// (DEL, C1, format characters) escaped as \u00XX: the same strings to a
// reader, nothing a terminal acts on.
func termSafeJSON(b []byte) []byte {
	var out bytes.Buffer
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Cf, r) {
			fmt.Fprintf(&out, `\u%04x`, r)
		} else {
			out.Write(b[:size])
		}
		b = b[size:]
	}
	return out.Bytes()
}

// guestFree is the bytes free for the guest's docker data, asked of the
// guest's df.
func guestFree(inst *store.Instance) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		var out, errOut bytes.Buffer
		code, err := execVM(ctx, inst, []string{"df", "-Pk", "/var/lib/docker"}, nil, &out, &errOut)
		if err != nil {
			return 0, err
		}
		if code != 0 {
			return 0, fmt.Errorf("df in the guest: exit %d: %s", code, strings.TrimSpace(errOut.String()))
		}
		return parseDfAvailable(out.String())
	}
}

// parseDfAvailable reads the Available column (KiB) of `df -Pk PATH`.
func parseDfAvailable(out string) (int64, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	fields := strings.Fields(lines[len(lines)-1])
	if len(lines) < 2 || len(fields) < 6 {
		return 0, fmt.Errorf("df in the guest answered %q", out)
	}
	kib, err := strconv.ParseInt(fields[3], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("df in the guest answered %q: %w", out, err)
	}
	return kib << 10, nil
}
