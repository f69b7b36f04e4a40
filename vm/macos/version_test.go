package macos

import "testing"

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Version
		ok   bool
	}{
		{"14.5", Version{14, 5}, true},
		{"13.6.1", Version{13, 6}, true},
		{"15", Version{15, 0}, true},
		{" 26.0\n", Version{26, 0}, true},
		{"", Version{}, false},
		{"14.x", Version{}, false},
		{"1.2.3.4", Version{}, false},
		{"-1", Version{}, false},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestVZSupported(t *testing.T) {
	for in, want := range map[string]bool{
		"":       false, // Linux
		"12.7.6": false,
		"13.0":   true,
		"13":     true,
		"14.5":   true,
		"26.1":   true,
		"junk":   false,
	} {
		if got := VZSupported(in); got != want {
			t.Errorf("VZSupported(%q) = %v, want %v", in, got, want)
		}
	}
	if MinVZ != (Version{13, 0}) {
		t.Errorf("MinVZ = %v: README, the --vm-type help and hack/vz docs say 13", MinVZ)
	}
}
