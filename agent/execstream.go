package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
)

// OpenRaw opens a bare stream to the guest agent: the host agent relays it
// to `vmdock ssh`, which speaks the protocol itself (see ExecStream).
func (c *Client) OpenRaw(ctx context.Context) (net.Conn, error) {
	st, err := c.sess.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("agent: open stream: %w", err)
	}
	return st, nil
}

// ExecStream runs req on st, a fresh stream to the guest agent: it sends
// the request, then copies stdin to the process and its output back until
// the exit frame. resize may be nil.
func ExecStream(ctx context.Context, st net.Conn, req ExecRequest, stdin io.Reader, stdout, stderr io.Writer, resize <-chan [2]uint16) (int, error) {
	if len(req.Argv) == 0 {
		return -1, errors.New("exec: empty command")
	}
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	if err := WriteJSONLine(st, Request{Op: OpExec, Exec: &req}); err != nil {
		return -1, fmt.Errorf("exec %s: %w", req.Argv[0], err)
	}
	resp, err := ReadResponse(st)
	if err != nil {
		return -1, fmt.Errorf("exec %s: %w", req.Argv[0], err)
	}
	if !resp.OK {
		return -1, fmt.Errorf("exec %s: %s", req.Argv[0], resp.Error)
	}
	fw := NewFrameWriter(st)
	done := make(chan struct{})
	defer close(done)
	if stdin != nil {
		go func() {
			// Copy errors only mean the stream is gone; the frame loop
			// below reports that.
			_, err := io.Copy(fw.Writer(FrameStdin), stdin)
			if err == nil {
				_ = fw.WriteFrame(FrameStdinEOF, nil)
			}
		}()
	} else {
		_ = fw.WriteFrame(FrameStdinEOF, nil)
	}
	if resize != nil {
		go func() {
			for {
				select {
				case sz, ok := <-resize:
					if !ok {
						return
					}
					if fw.WriteFrame(FrameResize, ResizePayload(sz[0], sz[1])) != nil {
						return
					}
				case <-done:
					return
				}
			}
		}()
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if stdout == nil {
		stdout = io.Discard
	}
	for {
		kind, payload, err := ReadFrame(st)
		if err != nil {
			if ctx.Err() != nil {
				return -1, fmt.Errorf("exec %s: %w", req.Argv[0], context.Cause(ctx))
			}
			return -1, fmt.Errorf("exec %s: stream ended before the exit code: %w", req.Argv[0], err)
		}
		switch kind {
		case FrameStdout:
			if _, err := stdout.Write(payload); err != nil {
				return -1, fmt.Errorf("exec %s: write stdout: %w", req.Argv[0], err)
			}
		case FrameStderr:
			if _, err := stderr.Write(payload); err != nil {
				return -1, fmt.Errorf("exec %s: write stderr: %w", req.Argv[0], err)
			}
		case FrameExit:
			// A yamux Close only half-closes, so the guest still reports
			// the exit of the process it killed for us: that is a cancel.
			if ctx.Err() != nil {
				return -1, fmt.Errorf("exec %s: %w", req.Argv[0], context.Cause(ctx))
			}
			var ex ExecExit
			if err := json.Unmarshal(payload, &ex); err != nil {
				return -1, fmt.Errorf("exec %s: bad exit frame: %w", req.Argv[0], err)
			}
			if ex.Error != "" {
				return -1, fmt.Errorf("exec %s: %s", req.Argv[0], ex.Error)
			}
			return ex.Code, nil
		}
	}
}
