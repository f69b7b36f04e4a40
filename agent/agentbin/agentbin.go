// Package agentbin carries the guest agent binaries inside vmdock, so the
// agent in the guest always matches the host agent that talks to it.
package agentbin

import (
	"embed"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
)

// bin holds vmdock-agent-linux-<arch>.zst, written by `make build`. The
// README keeps the pattern matching in a clean clone, so `go test ./...`
// works before any build.
//
//go:embed bin
var bin embed.FS

// OverrideEnv names a file to use instead of the embedded agent: handy
// while developing the agent without rebuilding vmdock.
const OverrideEnv = "VMDOCK_AGENT_BINARY"

// Binary returns the guest agent for linux/<arch> (amd64 or arm64).
func Binary(arch string) ([]byte, error) {
	if p := os.Getenv(OverrideEnv); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read guest agent from $%s: %w", OverrideEnv, err)
		}
		return b, nil
	}
	name := "bin/vmdock-agent-linux-" + arch + ".zst"
	f, err := bin.Open(name)
	if err != nil {
		return nil, fmt.Errorf("guest agent for linux/%s is not embedded in this vmdock build (run `make build`): %w", arch, err)
	}
	defer f.Close()
	dec, err := zstd.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("open embedded guest agent %s: %w", name, err)
	}
	defer dec.Close()
	b, err := io.ReadAll(dec)
	if err != nil {
		return nil, fmt.Errorf("decompress embedded guest agent %s: %w", name, err)
	}
	return b, nil
}
