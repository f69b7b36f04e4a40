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

// HostHello writes the hello line, waits for the guest's echo of exactly
// that line (older echoes are skipped), then confirms with GO.
func HostHello(rw io.ReadWriter, nonce string) error {
	want := HelloLine + " " + nonce
	if _, err := io.WriteString(rw, want+"\n"); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	if err := awaitLine(rw, want); err != nil {
		return fmt.Errorf("wait for the guest's hello echo: %w", err)
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

func awaitLine(r io.Reader, want string) error {
	for {
		line, err := readLine(r)
		if err != nil {
			return err
		}
		// A partial frame of an earlier session may share the line.
		if strings.HasSuffix(string(line), want) {
			return nil
		}
	}
}
