package config

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/network/loopback"
)

// oneLineErr fails unless err is set, holds every want and is one line.
func oneLineErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q is more than one line", err)
	}
}

func TestLoopbackAliasIPMatchesWhatTheAliasAccepts(t *testing.T) {
	for _, ip := range []string{"10.254.254.254", "192.168.5.5", "172.16.0.1", "127.0.0.5", "127.0.0.1", "224.0.0.1", "239.1.1.1", "0.0.0.0", "::1", "fd00::1", "::ffff:10.0.0.1", "10.254.254", "010.1.1.1", "", "localhost"} {
		t.Run(ip, func(t *testing.T) {
			c := validConfig(t, linuxHost)
			c.Network.LoopbackAliasIP = ip
			err := c.ValidateOn(linuxHost)
			_, aliasErr := loopback.ParseIP(ip)
			if (err == nil) != (aliasErr == nil) {
				t.Fatalf("Validate says %v but the alias code says %v", err, aliasErr)
			}
			if err != nil {
				oneLineErr(t, err, `network.loopbackAliasIP: "`+ip+`" is not accepted`, "outside 127.0.0.0/8")
			}
		})
	}
}

func TestHostAccessIP(t *testing.T) {
	tests := []struct {
		ip string
		ok bool
	}{
		{"10.254.254.254", true}, {"192.168.5.2", true}, {"169.254.1.1", true},
		{"127.0.0.1", false}, {"127.5.5.5", false}, {"0.0.0.0", false}, {"224.0.0.1", false},
		{"255.255.255.255", false}, {"::1", false}, {"fd00::2", false}, {"::ffff:10.0.0.1", false},
		{"10.1", false}, {"", false},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			c := validConfig(t, linuxHost)
			c.Network.HostAccessIP = tt.ip
			err := c.ValidateOn(linuxHost)
			if tt.ok {
				if err != nil {
					t.Fatalf("ValidateOn: %v", err)
				}
				return
			}
			oneLineErr(t, err, `network.hostAccessIP: "`+tt.ip+`" is not accepted`, "IPv4 unicast")
		})
	}
}

func TestEnvValues(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string // empty: valid
	}{
		{name: "plain", env: map[string]string{"A": "b c", "EMPTY": "", "Q": `"quoted" $x`}},
		{name: "newline in value", env: map[string]string{"FOO": "a\nb"}, want: []string{`env: the value of FOO "a\nb" is not accepted`, "without newline or NUL"}},
		{name: "NUL in value", env: map[string]string{"FOO": "a\x00b"}, want: []string{`the value of FOO "a\x00b"`}},
		{name: "newline in name", env: map[string]string{"FOO\nBAR": "x"}, want: []string{`env: "FOO\nBAR=" is not accepted`}},
		{name: "NUL in name", env: map[string]string{"FOO\x00": "x"}, want: []string{`env: "FOO\x00="`}},
		{name: "long value is cut", env: map[string]string{"LONG": "a" + strings.Repeat("é", 100) + "\n"}, want: []string{"LONG", `..."`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t, linuxHost)
			c.Env = tt.env
			err := c.ValidateOn(linuxHost)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("ValidateOn: %v", err)
				}
				return
			}
			oneLineErr(t, err, tt.want...)
			if len(err.Error()) > 200 || strings.Contains(err.Error(), `\xc3`) {
				t.Errorf("error %q is too long or cuts a character in half", err)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	for _, tt := range []struct {
		bind string
		warn bool
	}{
		{"127.0.0.1", false}, {"127.0.0.2", false}, {"::1", false}, {"::ffff:127.0.0.1", false},
		{"0.0.0.0", true}, {"::", true}, {"192.168.1.10", true}, {"fe80::1", true},
	} {
		c := Default(linuxHost)
		c.Network.PortBind = tt.bind
		w := c.Warnings()
		if !tt.warn {
			if len(w) != 0 {
				t.Errorf("portBind %s: warnings %q, want none", tt.bind, w)
			}
			continue
		}
		if len(w) != 1 || !strings.Contains(w[0], "portBind "+tt.bind+" exposes every forwarded port") || strings.Contains(w[0], "\n") {
			t.Errorf("portBind %s: warnings %q, want one line naming it", tt.bind, w)
		}
	}
}

func TestSecondYAMLDocument(t *testing.T) {
	for _, ok := range []string{"cpus: 1\n---\n", "---\ncpus: 1\n", "cpus: 1\n---\n# only a comment\n---\n", "cpus: 1\n...\n"} {
		if c, err := Parse([]byte(ok), linuxHost); err != nil || c.CPUs != 1 {
			t.Errorf("Parse(%q) = cpus %d, %v; want cpus 1", ok, c.CPUs, err)
		}
	}
	for _, bad := range []string{"cpus: 1\n---\ncpus: 2\n", "cpus: 1\n---\n---\nmemory: 4\n", "cpus: 1\n--- \nnot a config\n"} {
		_, err := Parse([]byte(bad), linuxHost)
		oneLineErr(t, err, "a second YAML document (from line", "accepted: one document")
	}
	// A broken second document is reported as such, not ignored.
	_, err := Parse([]byte("cpus: 1\n---\ncpus: [\n"), linuxHost)
	oneLineErr(t, err, "invalid YAML")
}

func TestConfigFileSizeCap(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "vmdock.yaml")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: 200 MiB to read, no disk space used.
	if err := f.Truncate(200 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Load(huge, linuxHost)
	runtime.ReadMemStats(&after)
	oneLineErr(t, err, huge, "larger than 1024 KiB is not accepted", "up to 1024 KiB")
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("refusing a 200 MiB file allocated %d MiB", alloc>>20)
	}

	// Exactly at the cap is still read: a long comment pads a real config.
	edge := filepath.Join(dir, "edge.yaml")
	body := "cpus: 1\n#"
	body += strings.Repeat("x", MaxBytes-len(body)-1) + "\n"
	if err := os.WriteFile(edge, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(edge, linuxHost); err != nil || c.CPUs != 1 {
		t.Fatalf("config of exactly %d bytes: cpus %d, %v", MaxBytes, c.CPUs, err)
	}
	if err := os.WriteFile(edge, []byte(body+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(edge, linuxHost)
	oneLineErr(t, err, "larger than")
}

func TestSaveReplacesWithMode0600(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "vmdock.yaml")
	if err := os.WriteFile(p, []byte("cpus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Default(linuxHost)
	c.CPUs = 1
	c.MemoryGiB = 3
	if err := c.Save(p); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p, linuxHost)
	if err != nil || got.MemoryGiB != 3 {
		t.Fatalf("saved config reads back memory %v, %v", got.MemoryGiB, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 (the config may hold env secrets)", fi.Mode().Perm())
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("folder holds %d entries after Save, want 1", len(es))
	}
}

// A share's cache mode must suit its type (the mount's own, else
// mountType); vz has no setting, and sync mounts have no share to cache.
func TestMountCache(t *testing.T) {
	tests := []struct {
		name   string
		vmType string
		m      Mount
		want   string // substring of the error; empty: accepted
	}{
		{name: "virtiofs always", m: Mount{Type: mounts.TypeVirtiofs, Cache: "always"}},
		{name: "9p loose", m: Mount{Type: mounts.Type9p, Cache: "loose"}},
		{name: "default type 9p", m: Mount{Cache: "mmap"}},
		{name: "9p mode on virtiofs", m: Mount{Type: mounts.TypeVirtiofs, Cache: "loose"}, want: `mounts[].cache: "loose" is not accepted; accepted: auto, always, never for a virtiofs share`},
		{name: "unknown", m: Mount{Type: mounts.Type9p, Cache: "fast"}, want: `accepted: mmap, loose, none for a 9p share`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t, linuxHost)
			c.MountType = mounts.Type9p
			m := tt.m
			m.Location, m.GuestPath, m.Writable = c.Mounts[0].Location, c.Mounts[0].GuestPath, true
			c.Mounts = []Mount{m}
			err := c.ValidateOn(linuxHost)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ValidateOn: %v", err)
				}
				return
			}
			oneLineErr(t, err, tt.want)
		})
	}
}
