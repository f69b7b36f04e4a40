package sockpath

import (
	"strconv"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	fits := "/" + strings.Repeat("a", 102) // 103 bytes
	over := "/" + strings.Repeat("b", 103) // 104 bytes
	also := "/" + strings.Repeat("c", 110) // 111 bytes, listed after over
	if err := Check(103, "/short.sock", fits); err != nil {
		t.Errorf("Check of paths that fit = %v", err)
	}
	if err := Check(103); err != nil {
		t.Errorf("Check of no paths = %v", err)
	}
	err := Check(103, fits, over, also)
	if err == nil {
		t.Fatal("Check let a 104-byte path through a 103-byte limit")
	}
	msg := err.Error()
	for _, want := range []string{over, "104 bytes", "103", "VMDOCK_HOME"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, also) || strings.Contains(msg, "\n") {
		t.Errorf("not one line about the first long path: %q", msg)
	}
}

// Max leaves the last byte of sun_path to the NUL.
func TestMaxLeavesRoomForTheNUL(t *testing.T) {
	if Max != sunPath-1 || (sunPath != 104 && sunPath != 108) {
		t.Errorf("Max = %d for sun_path %d", Max, sunPath)
	}
	if err := Check(Max, "/"+strings.Repeat("x", Max-1)); err != nil {
		t.Errorf("a path of Max (%d) bytes: %v", Max, err)
	}
	if err := Check(Max, "/"+strings.Repeat("x", Max)); err == nil || !strings.Contains(err.Error(), strconv.Itoa(Max+1)+" bytes") {
		t.Errorf("a path of Max+1 bytes: %v", err)
	}
}
