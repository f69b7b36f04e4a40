package qemu

import (
	"slices"
	"testing"

	"github.com/vmdock/vmdock/mounts"
)

func TestVirtiofsdArgs(t *testing.T) {
	const sock = "/d/virtiofs-0.sock"
	tests := []struct {
		name   string
		v      Virtiofsd
		share  mounts.Share
		asRoot bool
		want   []string
	}{
		{
			name: "legacy C daemon as root", v: Virtiofsd{Path: "/usr/lib/qemu/virtiofsd"},
			share: mounts.Share{Tag: "t", HostPath: "/src/a,b"}, asRoot: true,
			want: []string{"--socket-path=" + sock, "-o", `source=/src/a\,b`, "-o", "cache=auto", "-o", "announce_submounts"},
		},
		{
			name: "rust daemon unprivileged, read-only", v: Virtiofsd{Path: "/usr/libexec/virtiofsd", Rust: true},
			share: mounts.Share{Tag: "t", HostPath: "/src", ReadOnly: true},
			want:  []string{"--socket-path=" + sock, "--shared-dir=/src", "--cache=auto", "--announce-submounts", "--sandbox=none", "--readonly"},
		},
		{
			name: "legacy daemon, cache always", v: Virtiofsd{Path: "/usr/lib/qemu/virtiofsd"},
			share: mounts.Share{Tag: "t", HostPath: "/src", Cache: "always"}, asRoot: true,
			want: []string{"--socket-path=" + sock, "-o", "source=/src", "-o", "cache=always", "-o", "announce_submounts"},
		},
		{
			name: "rust daemon as root keeps its sandbox", v: Virtiofsd{Rust: true},
			share: mounts.Share{Tag: "t", HostPath: "/src"}, asRoot: true,
			want: []string{"--socket-path=" + sock, "--shared-dir=/src", "--cache=auto", "--announce-submounts"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.v.args(sock, tt.share, tt.asRoot); !slices.Equal(got, tt.want) {
				t.Errorf("args = %q\nwant   %q", got, tt.want)
			}
		})
	}
}

func TestIsRustVirtiofsd(t *testing.T) {
	rust := "Usage: virtiofsd [OPTIONS] --shared-dir <SHARED_DIR>\n  --socket-path <SOCKET_PATH>"
	legacy := "usage: virtiofsd [options]\n    -o source=PATH             shared directory tree\n    --socket-path=PATH"
	if !isRustVirtiofsd(rust) || isRustVirtiofsd(legacy) {
		t.Error("virtiofsd dialect misdetected")
	}
}

func TestTailBuffer(t *testing.T) {
	tb := newTail(16)
	_, _ = tb.Write([]byte("first line\nsecond\n"))
	_, _ = tb.Write([]byte("\nthird\n"))
	// Only the last 16 bytes survive: "second\n\nthird\n" minus the head.
	if got := tb.lines(5); got != "second; third" {
		t.Errorf("lines(5) = %q", got)
	}
	if got := tb.lines(1); got != "third" {
		t.Errorf("lines(1) = %q", got)
	}
}
