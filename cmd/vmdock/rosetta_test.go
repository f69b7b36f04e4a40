package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/config"
)

func TestAskYes(t *testing.T) {
	for in, want := range map[string]bool{"y\n": true, "YES\n": true, " yes \n": true, "y": true, "n\n": false, "\n": false, "sure\n": false} {
		var out bytes.Buffer
		got, err := askYes(strings.NewReader(in), &out, "Install? [y/N] ")
		if err != nil || got != want {
			t.Errorf("askYes(%q) = %v, %v; want %v", in, got, err, want)
		}
		if out.String() != "Install? [y/N] " {
			t.Errorf("printed %q", out.String())
		}
	}
	if _, err := askYes(strings.NewReader(""), &bytes.Buffer{}, "?"); err == nil {
		t.Error("no answer at all (closed stdin) is not an error")
	}
}

// Without --vz-rosetta, or off vz, nothing is asked or checked.
func TestOfferRosettaOnlyForVZRosetta(t *testing.T) {
	for _, cfg := range []config.Config{{VMType: "vz"}, {VMType: "qemu", VZRosetta: true}} {
		if err := offerRosetta(context.Background(), cfg, strings.NewReader(""), &bytes.Buffer{}); err != nil {
			t.Errorf("offerRosetta(%+v) = %v", cfg, err)
		}
	}
	if isTerminal(strings.NewReader("")) || isTerminal(&bytes.Buffer{}) {
		t.Error("a reader or buffer counted as a terminal")
	}
}
