package keychain

import (
	"errors"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/internal/keychain/keychaintest"
)

// A real round trip through secret-tool and a Secret Service of the
// test's own: items stored as a user would, read by service, by service
// and account, and a missing one told apart from a failure.
func TestSecretServiceRoundTrip(t *testing.T) {
	keychaintest.Start(t)
	keychaintest.Store(t, "vmdock-test-gh", "", "ghp_test 123")
	keychaintest.Store(t, "vmdock-test-api", "alice", "alice-key")
	keychaintest.Store(t, "vmdock-test-api", "bob", "bob-key")
	if v, err := Read(Item{Service: "vmdock-test-gh"}); err != nil || v != "ghp_test 123" {
		t.Fatalf("Read by service: %q, %v", v, err)
	}
	if v, err := Read(Item{Service: "vmdock-test-api", Account: "bob"}); err != nil || v != "bob-key" {
		t.Fatalf("Read by service and account: %q, %v", v, err)
	}
	if err := Find(Item{Service: "vmdock-test-api", Account: "alice"}); err != nil {
		t.Fatalf("Find: %v", err)
	}
	for _, missing := range []Item{{Service: "vmdock-test-none"}, {Service: "vmdock-test-api", Account: "carol"}} {
		if _, err := Read(missing); !errors.Is(err, ErrNotFound) {
			t.Errorf("Read(%+v): %v; want ErrNotFound", missing, err)
		}
		if err := Find(missing); !errors.Is(err, ErrNotFound) {
			t.Errorf("Find(%+v): %v; want ErrNotFound", missing, err)
		}
	}
}

func TestReadWithoutSecretTool(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Read(Item{Service: "vmdock-test-gh"})
	if err == nil || !strings.Contains(err.Error(), "needs secret-tool on Linux") || !strings.Contains(err.Error(), "libsecret-tools") {
		t.Fatalf("no secret-tool: %v", err)
	}
}

func TestAddHint(t *testing.T) {
	if got := AddHint(Item{Service: "my api", Account: "bob"}); got != "secret-tool store --label='my api' service 'my api' account bob" {
		t.Fatalf("AddHint: %s", got)
	}
}
