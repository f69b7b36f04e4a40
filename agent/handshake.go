package agent

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// NewNonce returns a random token for one handshake.
func NewNonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported systems
	return hex.EncodeToString(b)
}

// HostHello writes the hello line and waits for the guest's echo of exactly
// that line; older lines (echoes of an earlier attempt) are skipped.
func HostHello(rw io.ReadWriter, nonce string) error {
	want := HelloLine + " " + nonce
	if _, err := io.WriteString(rw, want+"\n"); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	if err := awaitLine(rw, want); err != nil {
		return fmt.Errorf("wait for the guest's hello echo: %w", err)
	}
	return nil
}

// GuestHello waits for the host's hello line, discarding anything before
// it, and echoes it back.
func GuestHello(rw io.ReadWriter) error {
	line, err := awaitPrefix(rw, HelloLine+" ")
	if err != nil {
		return fmt.Errorf("wait for the host's hello: %w", err)
	}
	if _, err := io.WriteString(rw, line+"\n"); err != nil {
		return fmt.Errorf("echo hello: %w", err)
	}
	return nil
}

func awaitLine(r io.Reader, want string) error {
	for {
		line, err := readLine(r)
		if err != nil {
			return err
		}
		if string(line) == want {
			return nil
		}
	}
}

// awaitPrefix returns the first line that contains prefix, cut to start at
// prefix: stale bytes without a newline may sit in front of the hello.
func awaitPrefix(r io.Reader, prefix string) (string, error) {
	for {
		line, err := readLine(r)
		if err != nil {
			return "", err
		}
		if i := strings.LastIndex(string(line), prefix); i >= 0 {
			return strings.TrimSuffix(string(line[i:]), "\r"), nil
		}
	}
}
