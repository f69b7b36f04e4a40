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

// GoLine confirms a handshake: the host sends it only after it saw the
// echo of its own nonce, and the guest starts yamux only on the GO for the
// nonce it echoed last. Without it, a hello left in the virtio-serial buffer
// by an earlier host attempt gets echoed, both sides start yamux on
// different attempts, and every retry fails the same way.
const GoLine = "VMDOCK-GO"

// RestartLine is what a guest agent writes when it opens its virtio-serial
// port. QEMU keeps the host's end connected while the guest agent dies and
// comes back, so without it the host's session would only notice through
// its keepalive (up to 45 s). The line is not a yamux frame: a stale
// session fails on it at once. A host in its handshake sends a new hello
// instead, in case the old agent's session swallowed the first one.
const RestartLine = "VMDOCK-AGENT-RESTARTED"

// HostHello writes the hello line, waits for the guest's echo of exactly
// that line (older echoes are skipped), then confirms with GO.
func HostHello(rw io.ReadWriter, nonce string) error {
	want := HelloLine + " " + nonce
	if _, err := io.WriteString(rw, want+"\n"); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	for {
		line, err := readLine(rw)
		if err != nil {
			return fmt.Errorf("wait for the guest's hello echo: %w", err)
		}
		// A partial frame of an earlier session may share the line.
		if strings.HasSuffix(string(line), want) {
			break
		}
		if strings.HasSuffix(string(line), RestartLine) {
			// A fresh nonce: the guest may echo both hellos, and only
			// the last may be confirmed.
			nonce = NewNonce()
			want = HelloLine + " " + nonce
			if _, err := io.WriteString(rw, want+"\n"); err != nil {
				return fmt.Errorf("send hello: %w", err)
			}
		}
	}
	if _, err := io.WriteString(rw, GoLine+" "+nonce+"\n"); err != nil {
		return fmt.Errorf("send go: %w", err)
	}
	return nil
}

// GuestHello echoes every hello line it reads, discarding anything else,
// until the GO for the last echoed nonce arrives.
func GuestHello(rw io.ReadWriter) error {
	current := ""
	for {
		line, err := readLine(rw)
		if err != nil {
			return fmt.Errorf("wait for the host's hello: %w", err)
		}
		text := strings.TrimSuffix(string(line), "\r")
		if i := strings.LastIndex(text, HelloLine+" "); i >= 0 {
			hello := text[i:]
			current = strings.TrimPrefix(hello, HelloLine+" ")
			if _, err := io.WriteString(rw, hello+"\n"); err != nil {
				return fmt.Errorf("echo hello: %w", err)
			}
			continue
		}
		if current != "" && strings.HasSuffix(text, GoLine+" "+current) {
			return nil
		}
	}
}
