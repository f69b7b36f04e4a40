// Package trust adds the container-domains CA to the host's trust stores
// (`vmdock domains trust`): the system store, through sudo when vmdock is
// not root, printing each command first; and on Linux the user's NSS
// database, which Chromium and Firefox read. Where each store lives can be
// moved by environment variables, so tests touch nothing real.
package trust

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Environment variables that move the trust stores.
const (
	// SystemDirEnv is the Linux system CA folder update-ca-certificates
	// (or update-ca-trust) reads.
	SystemDirEnv = "VMDOCK_CA_SYSTEM_DIR"
	// NSSDBEnv is the NSS database folder (default ~/.pki/nssdb).
	NSSDBEnv = "VMDOCK_NSSDB"
)

// Runner runs one command, through sudo when sudo is set.
type Runner func(ctx context.Context, sudo bool, argv ...string) error

// Trust is one `vmdock domains trust` run.
type Trust struct {
	CertPath string    // the CA's PEM file
	Out      io.Writer // what runs and what was done, for the user
	Run      Runner
	LookPath func(string) (string, error)
	Getenv   func(string) string
	// Root: the process may change system stores without sudo.
	Root bool
	// Home is the user's home folder (for ~/.pki/nssdb).
	Home string
}

// New is the Trust for this machine: real commands, echoed to out.
func New(certPath string, out io.Writer) (*Trust, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("find the home folder for the NSS database (set %s): %w", NSSDBEnv, err)
	}
	return &Trust{
		CertPath: certPath,
		Out:      out,
		Run:      ExecRunner(out),
		LookPath: exec.LookPath,
		Getenv:   os.Getenv,
		Root:     os.Geteuid() == 0,
		Home:     home,
	}, nil
}

// Add puts the CA into this OS's stores (see add in the platform files).
func (t *Trust) Add(ctx context.Context) error {
	if _, err := t.certDER(); err != nil {
		return err
	}
	return add(ctx, t)
}

func (t *Trust) certDER() ([]byte, error) {
	b, err := os.ReadFile(t.CertPath)
	if err != nil {
		return nil, fmt.Errorf("read the CA certificate: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s is not a PEM certificate", t.CertPath)
	}
	return blk.Bytes, nil
}

// nick names this CA in stores that hold many: one per $VMDOCK_HOME, told
// apart by the certificate's hash.
func (t *Trust) nick() string {
	der, _ := t.certDER()
	sum := sha256.Sum256(der)
	return "vmdock-domains-ca-" + hex.EncodeToString(sum[:4])
}

func (t *Trust) sudo() bool { return !t.Root }

// ExecRunner runs commands as processes, through sudo when asked (unless
// sudo is missing: then an error saying to run as root), each command
// line printed to echo first.
func ExecRunner(echo io.Writer) Runner {
	return func(ctx context.Context, sudo bool, argv ...string) error {
		if sudo {
			if _, err := exec.LookPath("sudo"); err != nil {
				return fmt.Errorf("`%s` needs root and sudo is not installed: run vmdock as root", strings.Join(argv, " "))
			}
			argv = append([]string{"sudo"}, argv...)
		}
		fmt.Fprintf(echo, "running: %s\n", strings.Join(argv, " "))
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stdin = os.Stdin // sudo may ask for a password
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
}

// linux adds the CA to the system folder and the user's NSS database.
func linux(ctx context.Context, t *Trust) error {
	dir, update := t.Getenv(SystemDirEnv), []string{"update-ca-certificates"}
	switch {
	case t.has("update-ca-certificates"):
		if dir == "" {
			dir = "/usr/local/share/ca-certificates"
		}
	case t.has("update-ca-trust"):
		update = []string{"update-ca-trust", "extract"}
		if dir == "" {
			dir = "/etc/pki/ca-trust/source/anchors"
		}
	default:
		return fmt.Errorf("neither update-ca-certificates (Debian, Ubuntu: package ca-certificates) nor update-ca-trust (Fedora) is installed; add %s to the system's CA store by hand", t.CertPath)
	}
	// update-ca-certificates takes only *.crt files.
	dst := filepath.Join(dir, t.nick()+".crt")
	if same(t.CertPath, dst) {
		fmt.Fprintf(t.Out, "the system CA folder already has the CA (%s)\n", dst)
	} else {
		if err := t.Run(ctx, t.sudo(), "install", "-m", "0644", t.CertPath, dst); err != nil {
			return fmt.Errorf("copy the CA into the system CA folder: %w", err)
		}
		if err := t.Run(ctx, t.sudo(), update...); err != nil {
			return fmt.Errorf("update the system CA store: %w", err)
		}
		fmt.Fprintf(t.Out, "the system CA store trusts the CA (%s)\n", dst)
	}
	return t.nss(ctx)
}

// nss adds the CA to the user's NSS database, which Chromium and Firefox
// on Linux read instead of the system store. It is the user's own file:
// no sudo.
func (t *Trust) nss(ctx context.Context) error {
	db := t.Getenv(NSSDBEnv)
	if db == "" {
		db = filepath.Join(t.Home, ".pki", "nssdb")
	}
	if !t.has("certutil") {
		fmt.Fprintf(t.Out, "certutil is not installed (Debian: libnss3-tools), so Chromium and Firefox, which read %s, do not trust the CA yet: install it and run this again\n", db)
		return nil
	}
	if err := os.MkdirAll(db, 0o700); err != nil {
		return fmt.Errorf("NSS database %s: %w", db, err)
	}
	if _, err := os.Stat(filepath.Join(db, "cert9.db")); err != nil {
		if err := t.Run(ctx, false, "certutil", "-N", "-d", "sql:"+db, "--empty-password"); err != nil {
			return fmt.Errorf("create the NSS database %s: %w", db, err)
		}
	}
	if err := t.Run(ctx, false, "certutil", "-A", "-d", "sql:"+db, "-t", "C,,", "-n", t.nick(), "-i", t.CertPath); err != nil {
		return fmt.Errorf("add the CA to the NSS database %s: %w", db, err)
	}
	fmt.Fprintf(t.Out, "the NSS database %s trusts the CA (Chromium; Firefox profiles keep their own)\n", db)
	return nil
}

// darwin adds the CA to the System keychain as a trusted root.
func darwin(ctx context.Context, t *Trust) error {
	if err := t.Run(ctx, t.sudo(), "security", "add-trusted-cert", "-d", "-r", "trustRoot",
		"-k", "/Library/Keychains/System.keychain", t.CertPath); err != nil {
		return fmt.Errorf("add the CA to the System keychain: %w", err)
	}
	fmt.Fprintln(t.Out, "the System keychain trusts the CA (Safari, Chrome; Firefox keeps its own store)")
	return nil
}

func (t *Trust) has(cmd string) bool {
	_, err := t.LookPath(cmd)
	return err == nil
}

func same(a, b string) bool {
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
