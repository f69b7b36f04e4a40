package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/images"
)

func TestVersionNamesBaseURLAndPin(t *testing.T) {
	oldBase, oldPin := images.BaseURL, images.ManifestSHA256
	t.Cleanup(func() { images.BaseURL, images.ManifestSHA256 = oldBase, oldPin })
	pin := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		base, pin string
		want      []string
		fails     bool
	}{
		{"", "", []string{"images: no default download URL", "manifest: not pinned"}, false},
		{"https://github.com/acme/vmdock/releases/download/v1.0.0/", pin,
			[]string{"images: https://github.com/acme/vmdock/releases/download/v1.0.0/", "manifest: sha256:" + pin + " (pinned"}, false},
		{"https://example.com/", "nothex", []string{"manifest: invalid pin"}, true},
	} {
		images.BaseURL, images.ManifestSHA256 = tc.base, tc.pin
		var b bytes.Buffer
		err := writeVersion(&b)
		if (err != nil) != tc.fails {
			t.Errorf("base %q pin %q: err = %v, want failure %v", tc.base, tc.pin, err, tc.fails)
		}
		if !strings.HasPrefix(b.String(), "vmdock "+Version+" (") {
			t.Errorf("first line %q", b.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("base %q pin %q: output %q lacks %q", tc.base, tc.pin, b.String(), w)
			}
		}
	}
}
