package loopback

import (
	"strings"
	"testing"
)

func TestParseIP(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"10.254.254.254", "10.254.254.254", true},
		{"192.168.77.1", "192.168.77.1", true},
		{"", "", false},
		{"10.254.254", "", false},
		{"::1", "", false},
		{"fd00::1", "", false},
		{"127.0.0.2", "", false},
		{"0.0.0.0", "", false},
		{"224.0.0.1", "", false},
		{"host.docker.internal", "", false},
	}
	for _, tt := range tests {
		got, err := ParseIP(tt.in)
		if tt.ok != (err == nil) || got != tt.want {
			t.Errorf("ParseIP(%q) = %q, %v; want %q, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), `"`+tt.in+`"`) {
			t.Errorf("ParseIP(%q) error does not name the bad value: %v", tt.in, err)
		}
	}
}
