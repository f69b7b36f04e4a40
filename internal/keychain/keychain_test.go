package keychain

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSecurity answers like macOS's security(1) for a login keychain
// holding one item, service vmdock-test and account me, and a locked
// keychain for service locked; it logs its arguments beside itself.
const fakeSecurity = `#!/bin/sh
echo "$*" >> "$0.log"
case "$*" in
"find-generic-password -s vmdock-test -a me -w") echo 'tok-123' ;;
"find-generic-password -s vmdock-test -a me") echo 'keychain: "/Users/me/Library/Keychains/login.keychain-db"' ;;
"find-generic-password -s locked -w") echo 'security: SecKeychainSearchCopyNext: User interaction is not allowed.' >&2; exit 36 ;;
*) echo 'security: SecKeychainSearchCopyNext: The specified item could not be found in the keychain.' >&2; exit 44 ;;
esac
`

// The macOS lookup, run on any host through a fake security: the
// arguments it is given, the password from -w and nothing without it, a
// missing item, a keychain that refuses, and no tool at all.
func TestSecurity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "security")
	if err := os.WriteFile(path, []byte(fakeSecurity), 0o755); err != nil {
		t.Fatal(err)
	}
	item := Item{Service: "vmdock-test", Account: "me"}
	if v, err := security(path, item, true); err != nil || v != "tok-123" {
		t.Fatalf("read: %q, %v; want tok-123", v, err)
	}
	if v, err := security(path, item, false); err != nil || v != "" {
		t.Fatalf("find: %q, %v; want nothing read", v, err)
	}
	if _, err := security(path, Item{Service: "other"}, false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing item: %v; want ErrNotFound", err)
	}
	_, err := security(path, Item{Service: "locked"}, true)
	if err == nil || errors.Is(err, ErrNotFound) || err.Error() != "security find-generic-password: SecKeychainSearchCopyNext: User interaction is not allowed." {
		t.Fatalf("a locked keychain: %v", err)
	}
	log, err := os.ReadFile(path + ".log")
	want := "find-generic-password -s vmdock-test -a me -w\nfind-generic-password -s vmdock-test -a me\nfind-generic-password -s other\nfind-generic-password -s locked -w\n"
	if err != nil || string(log) != want {
		t.Fatalf("security was run with\n%s(%v), want\n%s", log, err, want)
	}
	if _, err := security(filepath.Join(t.TempDir(), "security"), item, true); err == nil || !strings.Contains(err.Error(), "the keychain source needs") {
		t.Fatalf("no tool: %v", err)
	}
}

// What a failed secret-tool says reaches the error, its own name once;
// an exit 1 with nothing said is a missing item.
func TestSecretToolFailures(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret-tool")
	script := "#!/bin/sh\n[ \"$3\" = gone ] && exit 1\necho 'secret-tool: Cannot autolaunch D-Bus without X11 $DISPLAY' >&2\nexit 1\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := secretTool(path, Item{Service: "gone"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing item: %v; want ErrNotFound", err)
	}
	if _, err := secretTool(path, Item{Service: "x"}); err == nil || err.Error() != "secret-tool lookup: Cannot autolaunch D-Bus without X11 $DISPLAY" {
		t.Fatalf("no Secret Service: %v", err)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"gh:github.com": "gh:github.com", "my token": "'my token'", "it's": `'it'\''s'`} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
