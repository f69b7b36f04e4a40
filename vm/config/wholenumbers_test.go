package config

import (
	"strings"
	"testing"
)

func TestWholeNumberFields(t *testing.T) {
	tests := []struct {
		yaml string
		want string // error substring; empty: accepted
	}{
		{"cpus: 4.5\n", "cpus: 4.5 is not accepted; accepted: a whole number of CPUs"},
		{"disk: 60.5\n", "disk: 60.5 is not accepted; accepted: a whole number of GiB"},
		{"cpus: -0.5\n", "cpus: -0.5 is not accepted"},
		{"cpus: .nan\n", "cpus: NaN is not accepted"},
		{"disk: .inf\n", "disk: +Inf is not accepted"},
		{"base: &n 2.5\ncpus: *n\n", "cpus: 2.5 is not accepted"},
		{"cpus: 2\ndisk: 60\n", ""},
		{"cpus: 2.0\n", ""},
		{"memory: 1.5\n", ""}, // memory takes fractions of a GiB
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			err := checkWholeNumbers([]byte(tt.yaml))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			oneLineErr(t, err, tt.want)
		})
	}
}

// Parse refuses the fraction instead of reading 4.5 as 4.
func TestParseRefusesFractionalCPUs(t *testing.T) {
	if _, err := Parse([]byte("cpus: 4.5\nmemory: 2.5\n"), linuxHost); err == nil || !strings.Contains(err.Error(), "cpus: 4.5") {
		t.Errorf("Parse: err = %v, want cpus: 4.5 refused", err)
	}
	c, err := Parse([]byte("cpus: 4.0\nmemory: 2.5\n"), linuxHost)
	if err != nil || c.CPUs != 4 || c.MemoryGiB != 2.5 {
		t.Errorf("Parse = %+v, %v", c, err)
	}
}
