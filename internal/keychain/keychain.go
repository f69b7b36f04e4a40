// Package keychain reads a generic password from the host's keychain with
// the platform's own tool: /usr/bin/security on macOS, libsecret's
// secret-tool (the Secret Service: GNOME Keyring, KWallet) on Linux. A tool
// rather than a library keeps vmdock free of cgo, and the password passes
// through a pipe into this process only.
package keychain

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Item names a generic password: its service, and its account where
// several items share the service (empty: any account).
type Item struct {
	Service string
	Account string
}

// ErrNotFound is a keychain that holds no such item.
var ErrNotFound = errors.New("no such item in the keychain")

// toolTimeout bounds one run of the tool: it may ask the user to unlock
// the keychain or to let it read the item, and a question nobody answers
// fails the start rather than hanging it.
const toolTimeout = 2 * time.Minute

// securityNotFound is the exit status of security(1)'s
// find-generic-password for an item the keychain does not hold
// (errSecItemNotFound, -25300, truncated to a byte).
const securityNotFound = 44

// security looks it up with macOS's tool at path. With password it
// returns the item's password (-w); without, it checks only that the item
// exists, reading its attributes, which asks the user nothing.
func security(path string, it Item, password bool) (string, error) {
	args := []string{"find-generic-password", "-s", it.Service}
	if it.Account != "" {
		args = append(args, "-a", it.Account)
	}
	if password {
		args = append(args, "-w")
	}
	out, err := lookup(path, args, func(code int, _ string) bool { return code == securityNotFound })
	if err != nil || !password {
		return "", err
	}
	return out, nil
}

// secretTool returns its password with libsecret's tool at path, the
// item found by its service and account attributes.
func secretTool(path string, it Item) (string, error) {
	args := []string{"lookup", "service", it.Service}
	if it.Account != "" {
		args = append(args, "account", it.Account)
	}
	// secret-tool says nothing and exits 1 when no item matches.
	return lookup(path, args, func(code int, stderr string) bool { return code == 1 && stderr == "" })
}

// lookup runs the tool at path and returns what it printed, less the
// newline it ends with; notFound tells, from its exit status and what it
// said on stderr, that it failed for want of the item. Errors never carry
// the tool's output, which may be the password.
func lookup(path string, args []string, notFound func(code int, stderr string) bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).Output()
	var exit *exec.ExitError
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound):
		return "", fmt.Errorf("the keychain source needs %s, which is missing", path)
	case ctx.Err() != nil:
		return "", fmt.Errorf("%s %s: no answer within %s (a question to unlock the keychain or allow access left open?)", filepath.Base(path), args[0], toolTimeout)
	case errors.As(err, &exit):
		said := strings.TrimSpace(string(exit.Stderr))
		if notFound(exit.ExitCode(), said) {
			return "", ErrNotFound
		}
		return "", fmt.Errorf("%s %s: %s", filepath.Base(path), args[0], firstLine(said, filepath.Base(path), exit))
	case err != nil:
		return "", fmt.Errorf("%s %s: %w", filepath.Base(path), args[0], err)
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// firstLine is the first line a failed tool said, less its own name, or
// its exit status when it said nothing.
func firstLine(said, tool string, exit *exec.ExitError) string {
	line, _, _ := strings.Cut(said, "\n")
	if line = strings.TrimPrefix(strings.TrimSpace(line), tool+": "); line == "" {
		return exit.Error()
	}
	return line
}

// plainWord is what a shell takes as it is, unquoted.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9._:/@%+=,-]+$`)

// shellQuote is s as one shell word, for the commands AddHint suggests.
func shellQuote(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
