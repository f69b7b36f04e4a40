//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// checkConfigSafety runs against the booted, Running instance. Inputs
// that once failed only in the guest or after a boot are refused by
// `start` at once with the saved config untouched, and every file vmdock
// replaced during the boot is whole, with no temp file of an atomic write
// left behind.
func checkConfigSafety(t *testing.T, e *env) {
	dir := filepath.Join(e.home, "default")
	e.timed("late-failing inputs are refused at once, config untouched", func(t *testing.T) {
		cfgPath := filepath.Join(dir, "vmdock.yaml")
		before, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--loopback-alias-ip", "127.0.0.5"}, `network.loopbackAliasIP: "127.0.0.5" is not accepted`},
			{[]string{"--loopback-alias-ip", "224.0.0.1"}, `network.loopbackAliasIP: "224.0.0.1" is not accepted`},
			{[]string{"--env", "A=x\ny"}, `env: the value of A "x\ny" is not accepted`},
			{[]string{"-V", e.work + ":rel"}, `"rel" is neither a mode nor an absolute guest path`},
		} {
			start := time.Now()
			out, errOut, err := e.try(time.Minute, e.vmdock, append([]string{"start"}, c.args...)...)
			took := time.Since(start)
			if err == nil || !strings.Contains(errOut, c.want) {
				t.Errorf("start %q: %v, stderr %q, stdout %q; want an error with %q", c.args, err, errOut, out, c.want)
			}
			if took > 5*time.Second {
				t.Errorf("start %q took %s to refuse", c.args, took)
			}
		}
		after, err := os.ReadFile(cfgPath)
		if err != nil || !bytes.Equal(before, after) {
			t.Errorf("refused starts changed %s (%v)", cfgPath, err)
		}
		if fi, err := os.Stat(cfgPath); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", cfgPath, err)
		}
	})
	e.timed("files replaced during the boot are whole, no temp files left", func(t *testing.T) {
		for _, root := range []string{e.home, e.dockerCfg} {
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return nil
				}
				if n := d.Name(); strings.Contains(n, ".tmp-") || strings.HasSuffix(n, ".tmp") {
					t.Errorf("temp file left behind: %s", p)
				}
				return nil
			})
		}
		for _, name := range []string{"spec.json", "state.json"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !json.Valid(b) {
				t.Errorf("%s is not whole JSON (%v): %.200q", name, err, b)
			}
		}
		pidText, err := os.ReadFile(filepath.Join(dir, "ha.pid"))
		pid, perr := strconv.Atoi(strings.TrimSpace(string(pidText)))
		if err != nil || perr != nil || pid <= 1 {
			t.Fatalf("ha.pid %q: %v %v", pidText, err, perr)
		}
		var st struct{ PID int }
		if err := json.Unmarshal([]byte(e.run(time.Minute, e.vmdock, "status", "--json")), &st); err != nil || st.PID != pid {
			t.Errorf("status --json pid %d (%v), ha.pid %d", st.PID, err, pid)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "image.digest")); err != nil || !strings.Contains(string(b), ":") || strings.Count(string(b), "\n") != 1 {
			t.Errorf("image.digest %q: %v", b, err)
		}
	})
}
