package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/instance"
)

// status shows each share as the guest gets it: its own type else the
// instance's, its guest path, ro unless writable, in config order.
func TestStatusShowsResolvedShares(t *testing.T) {
	cfg := config.Default(testHost)
	cfg.MountType = mounts.TypeVirtiofs
	cfg.Mounts = []config.Mount{
		{Location: "/home/u", GuestPath: "/home/u", Writable: true},
		{Location: "/src", GuestPath: "/work", Type: mounts.Type9p},
		{Location: "/data"},
	}
	var out bytes.Buffer
	s := statusJSON{Profile: "default", Status: instance.StateStopped, Config: &cfg}
	if err := writeStatusText(&out, s, instance.LiveStatus{State: instance.StateStopped}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "mount:") {
			got = append(got, strings.Join(strings.Fields(l), " "))
		}
	}
	want := []string{
		"mount: /home/u -> /home/u (virtiofs, rw)",
		"mount: /src -> /work (9p, ro)",
		"mount: /data -> /data (virtiofs, ro)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("status mounts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
