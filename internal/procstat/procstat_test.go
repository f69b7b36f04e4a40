package procstat

import (
	"strings"
	"testing"
	"time"
)

func TestCPUTime(t *testing.T) {
	for _, tt := range []struct {
		name, stat string
		want       time.Duration
	}{
		// The command name holds a space and a ')': fields count after the last one.
		{"qemu, ')' in the name", "11745 (qemu) x) S 11695 11745 11695 0 -1 138412416 426394 0 0 0 8209 320 0 0 20 0 6 0 1234 0 0\n", (8209 + 320) * 10 * time.Millisecond},
		{"agent, space in the name", "1234 (vmdock agent) S 1 1234 1234 0 -1 4194560 500 0 0 0 150 50 0 0 20 0 9 0 100 1000000 500 18446744073709551615", 2 * time.Second},
		{"nested parentheses", "4242 (qemu-system-x86 (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 5 0 100 0 0", 2 * time.Second},
	} {
		got, err := CPUTime(tt.stat)
		if err != nil || got != tt.want {
			t.Errorf("%s: CPUTime = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "garbage", "11745 (qemu) S 1 2 3", "11745 (qemu) S 11695 11745 11695 0 -1 1 2 0 0 0 x 320 0"} {
		if d, err := CPUTime(bad); err == nil {
			t.Errorf("CPUTime(%q) = %v, want an error", bad, d)
		}
	}
}

func TestStartTime(t *testing.T) {
	stat := "1234 (vmdock (a b)) S 1 1234 1234 0 -1 4194560 500 0 0 0 150 50 0 0 20 0 9 0 98765 1000000 500"
	if got, err := StartTime(stat); err != nil || got != 987650*time.Millisecond {
		t.Errorf("StartTime = %v, %v; want 987.65s", got, err)
	}
	short := stat[:strings.LastIndex(stat, " 98765")]
	if _, err := StartTime(short); err == nil || !strings.Contains(err.Error(), "want at least 20") {
		t.Errorf("StartTime of a line without field 22 = %v, want a short-line error", err)
	}
	if _, err := StartTime(strings.Replace(stat, "98765", "-1", 1)); err == nil || !strings.Contains(err.Error(), "stat field 22") {
		t.Errorf("StartTime of a bad number = %v, want the field named", err)
	}
}
