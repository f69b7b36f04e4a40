package trust

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/network/domains/localca"
)

type fake struct {
	calls []string
	tools map[string]bool
}

// run records each command; install and certutil -N do what the real ones
// would to the (temporary) folders, so a second run sees their work.
func (f *fake) run(_ context.Context, sudo bool, argv ...string) error {
	line := strings.Join(argv, " ")
	if sudo {
		line = "sudo " + line
	}
	f.calls = append(f.calls, line)
	switch {
	case argv[0] == "install":
		b, err := os.ReadFile(argv[3])
		if err != nil {
			return err
		}
		return os.WriteFile(argv[4], b, 0o644)
	case argv[0] == "certutil" && argv[1] == "-N":
		return os.WriteFile(filepath.Join(strings.TrimPrefix(argv[3], "sql:"), "cert9.db"), nil, 0o600)
	}
	return nil
}

func (f *fake) lookPath(cmd string) (string, error) {
	if f.tools[cmd] {
		return "/usr/bin/" + cmd, nil
	}
	return "", errors.New("not found")
}

func setup(t *testing.T, tools ...string) (*Trust, *fake, *bytes.Buffer, map[string]string) {
	t.Helper()
	ca, err := localca.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{tools: map[string]bool{}}
	for _, tool := range tools {
		f.tools[tool] = true
	}
	env := map[string]string{SystemDirEnv: t.TempDir(), NSSDBEnv: filepath.Join(t.TempDir(), "nssdb")}
	out := &bytes.Buffer{}
	return &Trust{
		CertPath: ca.CertPath(), Out: out, Run: f.run, LookPath: f.lookPath,
		Getenv: func(k string) string { return env[k] }, Home: "/nonexistent",
	}, f, out, env
}

func TestLinuxSystemFolderAndNSS(t *testing.T) {
	tr, f, out, env := setup(t, "update-ca-certificates", "certutil")
	if err := linux(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(env[SystemDirEnv], tr.nick()+".crt")
	db := "sql:" + env[NSSDBEnv]
	want := []string{
		"sudo install -m 0644 " + tr.CertPath + " " + dst,
		"sudo update-ca-certificates",
		"certutil -N -d " + db + " --empty-password",
		"certutil -A -d " + db + " -t C,, -n " + tr.nick() + " -i " + tr.CertPath,
	}
	if strings.Join(f.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(f.calls, "\n"), strings.Join(want, "\n"))
	}
	// again, as root: the system folder has it, the NSS db exists
	f.calls = nil
	tr.Root = true
	if err := linux(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 1 || !strings.HasPrefix(f.calls[0], "certutil -A ") {
		t.Errorf("second run: %q, want only the NSS add", f.calls)
	}
	if !strings.Contains(out.String(), "already has the CA") {
		t.Errorf("output %q", out.String())
	}
}

func TestLinuxFedoraAndMissingTools(t *testing.T) {
	tr, f, out, env := setup(t, "update-ca-trust")
	tr.Root = true
	if err := linux(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 2 || f.calls[0] != "install -m 0644 "+tr.CertPath+" "+filepath.Join(env[SystemDirEnv], tr.nick()+".crt") ||
		f.calls[1] != "update-ca-trust extract" {
		t.Errorf("commands %q", f.calls)
	}
	if !strings.Contains(out.String(), "certutil is not installed") {
		t.Errorf("no word on the missing certutil: %q", out.String())
	}

	tr, _, _, _ = setup(t)
	if err := linux(context.Background(), tr); err == nil || !strings.Contains(err.Error(), "update-ca-certificates") {
		t.Errorf("with no CA tools: %v", err)
	}
}

func TestDarwinKeychain(t *testing.T) {
	tr, f, _, _ := setup(t)
	if err := darwin(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	want := "sudo security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain " + tr.CertPath
	if len(f.calls) != 1 || f.calls[0] != want {
		t.Errorf("commands %q, want %q", f.calls, want)
	}
}

func TestAddRejectsAFileThatIsNoCertificate(t *testing.T) {
	tr, f, _, _ := setup(t, "update-ca-certificates")
	tr.CertPath = filepath.Join(t.TempDir(), "x.pem")
	os.WriteFile(tr.CertPath, []byte("not pem"), 0o644) //nolint:errcheck
	if err := tr.Add(context.Background()); err == nil || !strings.Contains(err.Error(), "not a PEM certificate") {
		t.Errorf("Add: %v", err)
	}
	if len(f.calls) != 0 {
		t.Errorf("ran %q", f.calls)
	}
}
