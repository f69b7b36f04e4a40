package vz

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestRosettaCaching(t *testing.T) {
	// vz wraps its sentinel the same way: "unsupported build target macOS
	// version for 14.0 (... needs recompilation)".
	sdkTooOld := fmt.Errorf("%w (%w)", errCachingNotBuiltIn, errors.New("unsupported build target macOS version for 14.0"))
	tests := []struct {
		name        string
		plan        RosettaPlan
		setErr      error
		wantSet     bool
		wantWarning string
		wantErr     string
	}{
		{name: "no cache planned", plan: RosettaPlan{Tag: "rosetta"}},
		{name: "cache on", plan: RosettaPlan{Tag: "rosetta", CachingSocket: "vmdock-rosettad"}, wantSet: true},
		{name: "SDK too old: boot uncached and warn", plan: RosettaPlan{Tag: "rosetta", CachingSocket: "vmdock-rosettad"}, setErr: sdkTooOld,
			wantSet: true, wantWarning: "without its translation cache"},
		{name: "any other failure fails", plan: RosettaPlan{Tag: "rosetta", CachingSocket: "vmdock-rosettad"}, setErr: errors.New("name length exceeds maximum"),
			wantSet: true, wantErr: `rosetta caching socket "vmdock-rosettad": name length exceeds maximum`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var set []string
			warning, err := rosettaCaching(tt.plan, func(socket string) error { set = append(set, socket); return tt.setErr })
			if (len(set) > 0) != tt.wantSet || (tt.wantSet && set[0] != tt.plan.CachingSocket) {
				t.Errorf("set called with %q, want the plan's socket: %v", set, tt.wantSet)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			if tt.wantWarning == "" && warning != "" || !strings.Contains(warning, tt.wantWarning) {
				t.Errorf("warning = %q, want %q", warning, tt.wantWarning)
			}
			if tt.wantWarning != "" && !strings.Contains(warning, "macOS 14 SDK") {
				t.Errorf("warning %q does not say how to get the cache", warning)
			}
		})
	}
}
