package main

import (
	"strconv"
	"time"

	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/store"
)

// configuredIdle is the idle period the instance's config gives a start,
// for messages; "?" when the config cannot be read.
func configuredIdle(g *globals, inst *store.Instance) string {
	cfg, err := inst.LoadConfig(g.host)
	if err != nil {
		return "?"
	}
	return cfg.Idle.String()
}

// pausedSuffix is what the status line adds for a VM paused while idle:
// it is Running (the next use wakes it), just asleep.
func pausedSuffix(h *control.Status) string {
	if h == nil || h.Idle == nil || !h.Idle.Paused || h.Idle.PausedSince == nil {
		return ""
	}
	return " (paused while idle since " + h.Idle.PausedSince.Local().Format(time.TimeOnly) + ")"
}

// idleLine says when the VM pauses, for the status text.
func idleLine(i *control.IdleStatus) string {
	switch {
	case i.Off != "":
		return "never pauses: " + i.Off
	case i.After == "0":
		return "never pauses (idle: 0)"
	}
	s := "pauses after " + i.After + " unused"
	if i.Pauses > 0 {
		s += "; paused " + strconv.Itoa(i.Pauses) + "x"
		if i.LastWakeMs != nil {
			s += ", last wake " + (time.Duration(*i.LastWakeMs * float64(time.Millisecond))).Round(time.Millisecond).String()
		}
	}
	return s
}
