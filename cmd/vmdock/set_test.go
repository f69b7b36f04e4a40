package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/instance"
)

// `vmdock set` names what it refuses and what it accepts, before it
// needs a running instance.
func TestSetRefusesBadInput(t *testing.T) {
	env(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "memory", "4"}, `set "memory": not a setting of a running instance; accepted: idle`},
		{[]string{"set", "idle", "ten"}, `set idle: "ten" is not a duration; accepted: a number with a unit (30s, 10m, 1h) or 0`},
		{[]string{"set", "idle", "5s"}, "idle: 5s is not accepted; accepted: 0 (never pause) or 10s and up"},
		{[]string{"set", "idle", "30s"}, `profile "default" does not exist`},
	} {
		_, err := run(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// A paused VM is Running, asleep: the status line and the idle line say
// since when and how the wakes went.
func TestStatusShowsIdlePause(t *testing.T) {
	since := time.Date(2026, 12, 6, 14, 3, 4, 0, time.Local)
	wake := 312.4
	s := statusJSON{Profile: "default", Status: instance.StateRunning, HostAgent: &control.Status{
		Idle: &control.IdleStatus{After: "10m0s", Paused: true, PausedSince: &since, Pauses: 3, LastWakeMs: &wake},
	}}
	var out bytes.Buffer
	if err := writeStatusText(&out, s, instance.LiveStatus{State: instance.StateRunning}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"Running (paused while idle since 14:03:04)", "pauses after 10m0s unused; paused 3x, last wake 312ms"} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
	for in, want := range map[control.IdleStatus]string{
		{After: "0"}: "never pauses (idle: 0)",
		{After: "10m0s", Off: "the vz driver cannot pause this VM"}: "never pauses: the vz driver cannot pause this VM",
	} {
		if got := idleLine(&in); got != want {
			t.Errorf("idleLine(%+v) = %q, want %q", in, got, want)
		}
	}
}
