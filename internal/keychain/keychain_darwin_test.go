package keychain

import "testing"

func TestAddHint(t *testing.T) {
	if got := AddHint(Item{Service: "my api"}); got != `security add-generic-password -s 'my api' -a "$USER" -w` {
		t.Fatalf("AddHint: %s", got)
	}
}
