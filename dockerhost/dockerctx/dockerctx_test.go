package dockerctx

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// otherContext is a context written by the real docker CLI (compact JSON,
// extra metadata fields, a TLS folder) that vmdock must never touch.
const otherContext = `{"Name":"remote","Metadata":{"Description":"prod box","Team":"ops"},"Endpoints":{"docker":{"Host":"ssh://me@prod","SkipTLSVerify":false}}}`

const configWithExtras = `{
	"auths": {
		"registry.example.com": {
			"auth": "dXNlcjpwYXNz"
		}
	},
	"credsStore": "desktop",
	"currentContext": "remote",
	"somethingNew": [1, 2, {"x": null}],
	"plugins": {"buildx": {"x": "y"}}
}`

func setupStore(t *testing.T) (Store, map[string][]byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "docker")
	s := Store{Dir: dir}
	files := map[string][]byte{
		filepath.Join(s.metaDir("remote"), "meta.json"):       []byte(otherContext),
		filepath.Join(s.tlsDir("remote"), "docker", "ca.pem"): []byte("not really a cert"),
	}
	for p, b := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(s.configPath(), []byte(configWithExtras), 0o640); err != nil {
		t.Fatal(err)
	}
	return s, files
}

func assertUntouched(t *testing.T, files map[string][]byte) {
	t.Helper()
	for p, want := range files {
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s changed: %q, %v", p, got, err)
		}
	}
}

func TestName(t *testing.T) {
	for profile, want := range map[string]string{"": "vmdock", "default": "vmdock", "work": "vmdock-work"} {
		if got := Name(profile); got != want {
			t.Errorf("Name(%q) = %q, want %q", profile, got, want)
		}
	}
}

func TestEnsureWritesDockerFormat(t *testing.T) {
	s, others := setupStore(t)
	if err := s.Ensure("vmdock", "unix:///home/u/.vmdock/default/docker.sock", "vmdock default"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Dir, "contexts", "meta",
		"af8d988341fc2a96e5c069215a1f85d3b59420857423def223fc75d3b3353402", "meta.json")
	if _, err := os.Stat(path); err != nil {
		// The digest is spelled out on purpose: the docker CLI names the
		// folder sha256(name), and deriving it here would hide a mistake.
		t.Fatalf("meta.json not at the sha256(name) path: %v", err)
	}
	got, _ := os.ReadFile(path)
	want := `{"Endpoints":{"docker":{"Host":"unix:///home/u/.vmdock/default/docker.sock","SkipTLSVerify":false}},"Metadata":{"Description":"vmdock default"},"Name":"vmdock"}`
	if string(got) != want {
		t.Errorf("meta.json =\n%s\nwant\n%s", got, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("meta.json mode %v, want 0644", fi.Mode().Perm())
	}
	if !s.Exists("vmdock") || s.Exists("vmdock-other") {
		t.Error("Exists disagrees with the store")
	}
	assertUntouched(t, others)
}

func TestEnsureUpdateKeepsForeignFields(t *testing.T) {
	s, _ := setupStore(t)
	p := filepath.Join(s.metaDir("vmdock"), "meta.json")
	os.MkdirAll(filepath.Dir(p), 0o755)
	old := `{"Name":"vmdock","Metadata":{"Description":"old","Extra":"kept"},"Endpoints":{"docker":{"Host":"unix:///old.sock","SkipTLSVerify":true},"kubernetes":{"Namespace":"x"}}}`
	os.WriteFile(p, []byte(old), 0o644)
	if err := s.Ensure("vmdock", "unix:///new.sock", "new"); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Metadata  map[string]string
		Endpoints map[string]map[string]any
	}
	b, _ := os.ReadFile(p)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata["Description"] != "new" || got.Metadata["Extra"] != "kept" {
		t.Errorf("metadata = %v", got.Metadata)
	}
	if got.Endpoints["docker"]["Host"] != "unix:///new.sock" || got.Endpoints["docker"]["SkipTLSVerify"] != false {
		t.Errorf("docker endpoint = %v", got.Endpoints["docker"])
	}
	if got.Endpoints["kubernetes"]["Namespace"] != "x" {
		t.Errorf("kubernetes endpoint lost: %v", got.Endpoints)
	}
}

func TestEnsureBadNames(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	for _, name := range []string{"default", "", "a", "-x", "has space", "a/b"} {
		err := s.Ensure(name, "unix:///x", "")
		if err == nil || !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("Ensure(%q) err = %v, want one naming the bad name", name, err)
		}
	}
}

func TestUsePreservesConfig(t *testing.T) {
	s, others := setupStore(t)
	if err := s.Ensure("vmdock", "unix:///x.sock", ""); err != nil {
		t.Fatal(err)
	}
	before := readKeys(t, s.configPath())
	if err := s.Use("vmdock"); err != nil {
		t.Fatal(err)
	}
	if s.Current() != "vmdock" {
		t.Fatalf("Current() = %q", s.Current())
	}
	after := readKeys(t, s.configPath())
	if len(after.keys) != len(before.keys) {
		t.Fatalf("keys %v, want %v", after.keys, before.keys)
	}
	for i, k := range before.keys {
		if after.keys[i] != k {
			t.Errorf("key order changed: %v, want %v", after.keys, before.keys)
		}
		if k == "currentContext" {
			continue
		}
		if !sameJSON(before.vals[k], after.vals[k]) {
			t.Errorf("key %s changed: %s -> %s", k, before.vals[k], after.vals[k])
		}
	}
	if fi, _ := os.Stat(s.configPath()); fi.Mode().Perm() != 0o640 {
		t.Errorf("config.json mode %v, want the original 0640", fi.Mode().Perm())
	}
	if err := s.Use("missing"); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("Use(missing) err = %v", err)
	}
	// "default" is stored as no key at all, like the docker CLI does.
	if err := s.Use(DefaultName); err != nil {
		t.Fatal(err)
	}
	if _, ok := readKeys(t, s.configPath()).get("currentContext"); ok {
		t.Error("currentContext still set after Use(default)")
	}
	if s.Current() != DefaultName {
		t.Errorf("Current() = %q", s.Current())
	}
	assertUntouched(t, others)
}

func readKeys(t *testing.T, path string) *configFile {
	t.Helper()
	c, err := readConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sameJSON(a, b []byte) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, a) == nil && json.Compact(&y, b) == nil && bytes.Equal(x.Bytes(), y.Bytes())
}

func TestNoDockerFolderYet(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "nope", ".docker")}
	if s.Current() != DefaultName {
		t.Fatalf("Current() = %q", s.Current())
	}
	prev, err := s.Activate("vmdock-x")
	if err == nil {
		t.Fatalf("Activate of a context that does not exist succeeded (prev %q)", prev)
	}
	if err := s.Ensure("vmdock-x", "unix:///x.sock", "x"); err != nil {
		t.Fatal(err)
	}
	prev, err = s.Activate("vmdock-x")
	if err != nil || prev != DefaultName {
		t.Fatalf("Activate = %q, %v", prev, err)
	}
	b, _ := os.ReadFile(s.configPath())
	if string(b) != "{\n\t\"currentContext\": \"vmdock-x\"\n}" {
		t.Errorf("config.json = %q", b)
	}
	if fi, _ := os.Stat(s.configPath()); fi.Mode().Perm() != 0o600 {
		t.Errorf("new config.json mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestActivateRestore(t *testing.T) {
	tests := []struct {
		name      string
		between   func(t *testing.T, s Store) // after Activate, before Restore
		wantAfter string
	}{
		{"back to previous", func(t *testing.T, s Store) {}, "remote"},
		{"user switched meanwhile", func(t *testing.T, s Store) {
			if err := s.Use(DefaultName); err != nil {
				t.Fatal(err)
			}
		}, DefaultName},
		{"user switched to another", func(t *testing.T, s Store) {
			if err := s.Ensure("third", "tcp://1.2.3.4:2375", ""); err != nil {
				t.Fatal(err)
			}
			if err := s.Use("third"); err != nil {
				t.Fatal(err)
			}
		}, "third"},
		{"previous deleted", func(t *testing.T, s Store) {
			if err := os.RemoveAll(s.metaDir("remote")); err != nil {
				t.Fatal(err)
			}
		}, DefaultName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := setupStore(t)
			if err := s.Ensure("vmdock", "unix:///x.sock", ""); err != nil {
				t.Fatal(err)
			}
			prev, err := s.Activate("vmdock")
			if err != nil || prev != "remote" {
				t.Fatalf("Activate = %q, %v; want remote", prev, err)
			}
			if s.Current() != "vmdock" {
				t.Fatalf("Current() after Activate = %q", s.Current())
			}
			tt.between(t, s)
			if err := s.Restore(prev, "vmdock"); err != nil {
				t.Fatal(err)
			}
			if got := s.Current(); got != tt.wantAfter {
				t.Errorf("Current() after Restore = %q, want %q", got, tt.wantAfter)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	s, others := setupStore(t)
	if err := s.Ensure("vmdock", "unix:///x.sock", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Use("vmdock"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("vmdock"); err != nil {
		t.Fatal(err)
	}
	if s.Exists("vmdock") {
		t.Error("context still exists")
	}
	if _, err := os.Stat(s.metaDir("vmdock")); !os.IsNotExist(err) {
		t.Errorf("meta folder left behind: %v", err)
	}
	if s.Current() != DefaultName {
		t.Errorf("Current() = %q after removing the current context", s.Current())
	}
	if err := s.Remove("vmdock"); err != nil {
		t.Errorf("removing again: %v", err)
	}
	assertUntouched(t, others)
}

func TestSymlinkedConfigKept(t *testing.T) {
	s, _ := setupStore(t)
	real := filepath.Join(t.TempDir(), "dotfiles-config.json")
	os.Rename(s.configPath(), real)
	if err := os.Symlink(real, s.configPath()); err != nil {
		t.Fatal(err)
	}
	if err := s.Use(DefaultName); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(s.configPath()); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("config.json symlink replaced: %v", err)
	}
	if s.Current() != DefaultName {
		t.Errorf("Current() = %q", s.Current())
	}
}

// TestDockerCLIReadsStore runs the real docker CLI against the store we
// wrote. `context ls` and `context inspect` only read files; no engine is
// contacted.
func TestDockerCLIReadsStore(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		// .ci/run, which installs the CLI (hack/deps.sh), must prove the
		// context store against it; a Mac runner has none.
		if os.Getenv("VMDOCK_TEST_DOCKER_CLI") == "required" {
			t.Fatal("docker CLI not installed, and VMDOCK_TEST_DOCKER_CLI=required: run hack/deps.sh, which installs it")
		}
		t.Skip("docker CLI not installed (hack/deps.sh installs it; VMDOCK_TEST_DOCKER_CLI=required makes this a failure)")
	}
	s, _ := setupStore(t)
	sock := "unix:///tmp/vmdock-test/docker.sock"
	if err := s.Ensure("vmdock", sock, "vmdock test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Activate("vmdock"); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(docker, args...)
		cmd.Env = append(cleanEnv(), "DOCKER_CONFIG="+s.Dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	type lsRow struct {
		Name           string
		Description    string
		DockerEndpoint string
		Current        bool
		Error          string
	}
	rows := map[string]lsRow{}
	// {{json .}} rather than "json", which Debian 12's docker CLI (20.10) lacks.
	for _, line := range bytes.Split(bytes.TrimSpace(run("context", "ls", "--format", "{{json .}}")), []byte("\n")) {
		var r lsRow
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("docker context ls line %q: %v", line, err)
		}
		rows[r.Name] = r
	}
	if r := rows["vmdock"]; r.DockerEndpoint != sock || !r.Current || r.Description != "vmdock test" || r.Error != "" {
		t.Errorf("docker context ls vmdock = %+v", r)
	}
	if r := rows["remote"]; r.DockerEndpoint != "ssh://me@prod" || r.Current {
		t.Errorf("docker context ls remote = %+v", r)
	}

	var inspect []struct {
		Name      string
		Metadata  map[string]any
		Endpoints map[string]struct {
			Host          string
			SkipTLSVerify bool
		}
	}
	if err := json.Unmarshal(run("context", "inspect", "vmdock"), &inspect); err != nil {
		t.Fatal(err)
	}
	if len(inspect) != 1 || inspect[0].Name != "vmdock" || inspect[0].Endpoints["docker"].Host != sock ||
		inspect[0].Metadata["Description"] != "vmdock test" {
		t.Errorf("docker context inspect vmdock = %+v", inspect)
	}
	// `inspect` with no name is the current context; `context show` would
	// say the same but is missing from Debian 12's docker CLI (20.10).
	if got := strings.TrimSpace(string(run("context", "inspect", "--format", "{{.Name}}"))); got != "vmdock" {
		t.Errorf("current context per docker = %q", got)
	}

	// And the other way round: a context the CLI writes reads back here.
	run("context", "create", "made-by-cli", "--docker", "host=unix:///tmp/cli.sock", "--description", "cli")
	if !s.Exists("made-by-cli") {
		t.Error("context created by the docker CLI not found by Exists")
	}
	run("context", "use", "made-by-cli")
	if s.Current() != "made-by-cli" {
		t.Errorf("Current() = %q after docker context use", s.Current())
	}
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DOCKER_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func TestEndpoint(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if err := s.Ensure("colima", "unix:///home/u/.colima/default/docker.sock", ""); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Endpoint("colima"); err != nil || got != "unix:///home/u/.colima/default/docker.sock" {
		t.Errorf("Endpoint(colima) = %q, %v", got, err)
	}
	if _, err := s.Endpoint("nope"); err == nil || !strings.Contains(err.Error(), `"nope" does not exist`) {
		t.Errorf("unknown context: %v", err)
	}
	t.Setenv("DOCKER_HOST", "")
	if got, err := s.Endpoint(DefaultName); err != nil || got != "unix:///var/run/docker.sock" {
		t.Errorf("Endpoint(default) = %q, %v", got, err)
	}
}
