package resume

import (
	"strings"
	"testing"
)

func TestFingerprintDiffersOnCACertsAndProxy(t *testing.T) {
	base := Fingerprint{Vmdock: "v", CACerts: "sha256:aa", Proxy: "sha256:p1"}
	if why := base.Differs(base); why != "" {
		t.Fatalf("equal fingerprints differ: %s", why)
	}
	ca := base
	ca.CACerts = "sha256:bb"
	if why := base.Differs(ca); !strings.Contains(why, "CA certificates") {
		t.Errorf("another CA set: %q", why)
	}
	px := base
	px.Proxy = "sha256:p2"
	if why := base.Differs(px); !strings.Contains(why, "proxy") {
		t.Errorf("another proxy: %q", why)
	}
	// A state saved before the fields existed has them empty: it must not
	// resume into a guest that now gets a CA set or proxy.
	old := base
	old.CACerts, old.Proxy = "", ""
	if why := old.Differs(base); why == "" {
		t.Errorf("a record without CA and proxy hashes matched")
	}
}
