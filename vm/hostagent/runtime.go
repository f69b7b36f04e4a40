package hostagent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

// containerRuntime is what the boot and the tunnels do differently for
// dockerd and containerd: which daemon the guest starts, which socket is
// tunnelled, and how the host knows it answers.
type containerRuntime struct {
	name        string // the boot step; its ping step is name+"-ping"
	start       func(ctx context.Context, c *agent.Client) error
	guestSocket string
	hostSocket  func(inst *store.Instance) string
	ping        func(ctx context.Context, sock string, timeout time.Duration) error
}

func runtimeFor(name string) containerRuntime {
	if name == config.RuntimeContainerd {
		return containerRuntime{
			name:        "containerd",
			start:       func(ctx context.Context, c *agent.Client) error { return c.StartContainerd(ctx) },
			guestSocket: agent.GuestContainerdSocket,
			hostSocket:  (*store.Instance).ContainerdSocketPath,
			ping:        waitGRPCServer,
		}
	}
	return containerRuntime{
		name:        "docker",
		start:       func(ctx context.Context, c *agent.Client) error { return c.StartDocker(ctx) },
		guestSocket: guestDockerSocket,
		hostSocket:  (*store.Instance).DockerSocketPath,
		ping:        waitDockerPing,
	}
}

// HTTP/2's connection preface and an empty SETTINGS frame: what a gRPC
// client sends first. A gRPC server (containerd) answers with its own
// SETTINGS frame, so this checks the whole path to containerd through the
// tunnel without a gRPC client.
var (
	h2Preface       = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	h2EmptySettings = []byte{0, 0, 0, 0x4, 0, 0, 0, 0, 0}
)

const h2FrameSettings = 0x4

// grpcAnswers sends the HTTP/2 preface on sock and reads the server's
// first frame, which must be SETTINGS.
func grpcAnswers(ctx context.Context, sock string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.SetDeadline(deadline)
	if _, err := c.Write(append(bytes.Clone(h2Preface), h2EmptySettings...)); err != nil {
		return err
	}
	hdr := make([]byte, 9)
	if _, err := io.ReadFull(c, hdr); err != nil {
		return fmt.Errorf("no HTTP/2 answer: %w", err)
	}
	if hdr[3] != h2FrameSettings {
		return fmt.Errorf("first HTTP/2 frame is of type %d, not SETTINGS", hdr[3])
	}
	return nil
}

// waitGRPCServer waits until the gRPC server behind sock answers.
func waitGRPCServer(ctx context.Context, sock string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		if lastErr = grpcAnswers(ctx, sock); lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd did not answer on %s: %v", sock, lastErr)
		case <-time.After(500 * time.Millisecond):
		}
		slog.Debug("waiting for containerd", "err", lastErr)
	}
}
