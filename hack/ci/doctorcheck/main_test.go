package main

import (
	"strings"
	"testing"

	"github.com/vmdock/vmdock/doctor"
)

// report is doctor's JSON as a Mac prints it, statuses chosen by the test.
func report(signature, cgo, rosetta doctor.Status) string {
	return `{"version":"v1.0.0","checks":[` +
		`{"name":"os","status":"ok","message":"macOS 15.3 on arm64"},` +
		`{"name":"signature","status":"` + string(signature) + `","message":"bin/vmdock","fix":"make build"},` +
		`{"name":"cgo","status":"` + string(cgo) + `","message":"built with cgo"},` +
		`{"name":"rosetta","status":"` + string(rosetta) + `","message":"not installed"},` +
		`{"name":"qemu","status":"fail","message":"not installed","fix":"brew install qemu"}],` +
		`"summary":{"ok":3,"warn":1,"fail":1}}`
}

var macWants = []string{"signature=ok", "cgo=ok", "rosetta=ok,warn"}

func TestCheckAcceptsAGoodMacBuild(t *testing.T) {
	wants, err := parseWants(macWants)
	if err != nil {
		t.Fatal(err)
	}
	for _, rosetta := range []doctor.Status{doctor.OK, doctor.Warn} {
		r, err := readReport(strings.NewReader(report(doctor.OK, doctor.OK, rosetta)))
		if err != nil {
			t.Fatal(err)
		}
		if p := Check(r, wants); len(p) != 0 {
			t.Errorf("rosetta %s: %v", rosetta, p)
		}
	}
}

func TestCheckRefusesWhatVZCannotRun(t *testing.T) {
	wants, err := parseWants(macWants)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sig, cgo, rosetta doctor.Status
		want              string
	}{
		{doctor.Fail, doctor.OK, doctor.OK, "check signature: fail, want ok: bin/vmdock (fix: make build)"},
		{doctor.Warn, doctor.OK, doctor.OK, "check signature: warn, want ok"},
		{doctor.OK, doctor.Fail, doctor.OK, "check cgo: fail, want ok"},
		{doctor.OK, doctor.OK, doctor.Fail, "check rosetta: fail, want ok or warn"},
	} {
		r, err := readReport(strings.NewReader(report(tc.sig, tc.cgo, tc.rosetta)))
		if err != nil {
			t.Fatal(err)
		}
		p := Check(r, wants)
		if len(p) != 1 || !strings.HasPrefix(p[0], tc.want) {
			t.Errorf("signature %s cgo %s rosetta %s: %q, want one problem starting %q", tc.sig, tc.cgo, tc.rosetta, p, tc.want)
		}
	}
	r, err := readReport(strings.NewReader(`{"checks":[{"name":"os","status":"ok","message":"x"}],"summary":{"ok":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p := Check(r, wants); len(p) != 3 || !strings.Contains(p[0], "not in the report") {
		t.Errorf("missing checks: %q", p)
	}
}

func TestBadInput(t *testing.T) {
	for _, args := range [][]string{nil, {"signature"}, {"signature=great"}, {"nosuch=ok"}, {"=ok"}} {
		if _, err := parseWants(args); err == nil {
			t.Errorf("parseWants(%q) accepted", args)
		}
	}
	for _, in := range []string{"", "not json", `{"checks":[]}`, `{"checks":[{"name":"os"}],"extra":1}`} {
		if _, err := readReport(strings.NewReader(in)); err == nil {
			t.Errorf("readReport(%q) accepted", in)
		}
	}
}
