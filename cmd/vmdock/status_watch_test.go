package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/instance"
)

var watchedShares = []control.ShareWatch{
	{HostPath: "/home/u", GuestPath: "/home/u", Watch: "inotify", LeftOut: []control.LeftOutFolder{
		{Path: "/home/u/app/node_modules", Why: "excluded: in the guest only"},
		{Path: "/home/u/.vmdock", Why: "vmdock's VM disks and logs"},
	}},
	{HostPath: "/data", GuestPath: "/data", Watch: "inotify", Capped: true},
	{HostPath: "/src", GuestPath: "/work", Watch: "off", Off: "inotify: false in its mount"},
}

// status says per share how host edits are watched and what is left out.
func TestStatusShowsShareWatches(t *testing.T) {
	var out bytes.Buffer
	s := statusJSON{Profile: "default", Status: instance.StateRunning, HostAgent: &control.Status{PID: 1, Phase: control.PhaseRunning, Shares: watchedShares}}
	if err := writeStatusText(&out, s, instance.LiveStatus{State: instance.StateRunning}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "watch:") {
			got = append(got, strings.Join(strings.Fields(l), " "))
		}
	}
	want := []string{
		"watch: /home/u: inotify; left out: /home/u/app/node_modules (excluded: in the guest only), /home/u/.vmdock (vmdock's VM disks and logs)",
		"watch: /data: inotify, watch limit reached (part of it unwatched)",
		"watch: /src: off (inotify: false in its mount)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("status watch lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// status --json carries the same under hostAgent.shares.
func TestStatusJSONShareWatches(t *testing.T) {
	var out bytes.Buffer
	s := statusJSON{Profile: "default", Status: instance.StateRunning, HostAgent: &control.Status{Shares: watchedShares}}
	if err := writeJSON(&out, s); err != nil {
		t.Fatal(err)
	}
	var back struct {
		HostAgent struct {
			Shares []struct {
				HostPath string `json:"hostPath"`
				Watch    string `json:"watch"`
				Off      string `json:"off"`
				Capped   bool   `json:"capped"`
				LeftOut  []struct {
					Path string `json:"path"`
					Why  string `json:"why"`
				} `json:"leftOut"`
			} `json:"shares"`
		} `json:"hostAgent"`
	}
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	sh := back.HostAgent.Shares
	if len(sh) != 3 || sh[0].Watch != "inotify" || len(sh[0].LeftOut) != 2 || sh[0].LeftOut[1].Path != "/home/u/.vmdock" ||
		sh[0].LeftOut[1].Why == "" || !sh[1].Capped || sh[2].Watch != "off" || sh[2].Off == "" {
		t.Errorf("hostAgent.shares = %+v\n%s", sh, out.String())
	}
}
