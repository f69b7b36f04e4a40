package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runSplit runs the CLI with stdout and stderr kept apart.
func runSplit(args ...string) (stdout, stderr string, err error) {
	root := newRootCmd(testHost)
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(""))
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// Each of these used to pass `start` and fail only in the guest or after
// a full boot; now each is one line before anything is written.
func TestStartRefusesEarly(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		yaml     string // the saved config, written after a first good start
		template string // template.yaml, for a profile that does not exist yet
		huge     string // "config" or "template": a sparse 200 MiB file
		want     []string
	}{
		{name: "loopback alias in 127/8", args: []string{"--loopback-alias-ip", "127.0.0.5"}, want: []string{`network.loopbackAliasIP: "127.0.0.5" is not accepted`, "outside 127.0.0.0/8"}},
		{name: "loopback alias multicast", args: []string{"--loopback-alias-ip", "224.0.0.1"}, want: []string{`network.loopbackAliasIP: "224.0.0.1"`}},
		{name: "newline in env value", args: []string{"--env", "FOO=a\nb"}, want: []string{`env: the value of FOO "a\nb" is not accepted`}},
		{name: "NUL in env value", args: []string{"--env", "FOO=a\x00b"}, want: []string{`the value of FOO "a\x00b"`}},
		{name: "newline in env name", args: []string{"--env", "FO\nO=b"}, want: []string{`env: "FO\nO="`}},
		{name: "host access on loopback", yaml: "network:\n  hostAccessIP: 127.0.0.1\n", want: []string{`network.hostAccessIP: "127.0.0.1" is not accepted`}},
		{name: "host access in template", template: "network:\n  hostAccessIP: 224.0.0.1\n", want: []string{`network.hostAccessIP: "224.0.0.1"`}},
		{name: "second yaml document", yaml: "cpus: 1\n---\ncpus: 2\n", want: []string{"a second YAML document (from line 2) is not accepted"}},
		{name: "-V bad mode", args: []string{"-V", "~/sub:rel"}, want: []string{`"rel" is neither a mode nor an absolute guest path`, "ro|rw|w"}},
		{name: "-V bad mode after guest path", args: []string{"-V", "~/sub:/sub:rel"}, want: []string{`mode "rel" is not accepted; accepted: ro, rw, w or sync`}},
		{name: "huge config", huge: "config", want: []string{"vmdock.yaml: larger than 1024 KiB is not accepted"}},
		{name: "huge template", huge: "template", want: []string{"template.yaml: larger than 1024 KiB is not accepted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, user := env(t)
			fake := installFake(t)
			os.Mkdir(filepath.Join(user, "sub"), 0o755)
			write := func(path, content string) {
				t.Helper()
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			configPath := filepath.Join(home, "default", "vmdock.yaml")
			templatePath := filepath.Join(home, "template.yaml")
			if tt.yaml != "" || tt.huge == "config" {
				if _, err := run("start"); err != nil {
					t.Fatalf("setup start: %v", err)
				}
			}
			switch {
			case tt.yaml != "":
				write(configPath, tt.yaml)
			case tt.template != "":
				write(templatePath, tt.template)
			case tt.huge == "config":
				if err := os.Truncate(configPath, 200<<20); err != nil {
					t.Fatal(err)
				}
			case tt.huge == "template":
				write(templatePath, "")
				if err := os.Truncate(templatePath, 200<<20); err != nil {
					t.Fatal(err)
				}
			}
			before := treeHash(t, home)
			nStarts := len(fake.starts)
			out, err := run(append([]string{"start"}, tt.args...)...)
			if err == nil {
				t.Fatalf("start %q succeeded; output %q", tt.args, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is more than one line", err)
			}
			if after := treeHash(t, home); after != before {
				t.Errorf("rejected start changed %s", home)
			}
			if _, statErr := os.Stat(filepath.Join(home, "default")); tt.yaml == "" && tt.huge != "config" && statErr == nil {
				t.Errorf("rejected start created the instance folder")
			}
			if len(fake.starts) != nStarts {
				t.Errorf("rejected start started the VM")
			}
		})
	}
}

func TestPortBindWarning(t *testing.T) {
	env(t)
	installFake(t)
	stdout, stderr, err := runSplit("start", "--port-bind", "0.0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	const want = "warning: network.portBind 0.0.0.0 exposes every forwarded port"
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, want) || strings.Contains(stdout, "warning") {
		t.Fatalf("start: stderr %q, stdout %q; want one line on stderr starting %q", stderr, stdout, want)
	}

	stdout, _, _ = runSplit("status")
	if !hasLine(stdout, "warning:", "network.portBind 0.0.0.0 exposes") {
		t.Errorf("status text lacks the warning:\n%s", stdout)
	}
	stdout, _, _ = runSplit("status", "--json")
	var st struct{ Warnings []string }
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "portBind 0.0.0.0") {
		t.Errorf("status --json warnings = %q (%v)\n%s", st.Warnings, err, stdout)
	}

	// Back on loopback: no warning anywhere.
	if _, stderr, err = runSplit("start", "--port-bind", "127.0.0.1"); err != nil || stderr != "" {
		t.Fatalf("start on loopback: stderr %q, %v", stderr, err)
	}
	if stdout, _, _ = runSplit("status"); strings.Contains(stdout, "warning") {
		t.Errorf("status warns about a loopback portBind:\n%s", stdout)
	}
	if stdout, _, _ = runSplit("status", "--json"); strings.Contains(stdout, "warnings") {
		t.Errorf("status --json lists warnings for a loopback portBind:\n%s", stdout)
	}
}

// hasLine reports whether one line of s starts with label and holds text.
func hasLine(s, label, text string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, label) && strings.Contains(l, text) {
			return true
		}
	}
	return false
}

func TestTemplateFileIsCappedAndSavedWhole(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	t.Setenv("VISUAL", "true") // an editor that saves nothing new
	out, err := run("template", "--edit")
	if err != nil || !strings.Contains(out, "saved") {
		t.Fatalf("template --edit: %v\n%s", err, out)
	}
	path := filepath.Join(home, "template.yaml")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("template file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	if es, _ := os.ReadDir(home); len(es) != 1 {
		t.Errorf("%s holds %d entries, want only template.yaml", home, len(es))
	}
	if err := os.Truncate(path, 200<<20); err != nil {
		t.Fatal(err)
	}
	out, err = run("template")
	if err == nil || !strings.Contains(err.Error(), "larger than 1024 KiB is not accepted") || out != "" {
		t.Fatalf("template of 200 MiB: %v, printed %d bytes", err, len(out))
	}
}
