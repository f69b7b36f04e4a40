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
	if err := startExec(st, req); err != nil {
		return -1, fmt.Errorf("exec %s: %w", req.Argv[0], err)
	}
	fw := NewFrameWriter(st)
	done := make(chan struct{})
	defer close(done)
	sendStdin(fw, stdin)
	if resize != nil {
		go sendResizes(fw, resize, done)
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if stdout == nil {
		stdout = io.Discard
	}
	return readExecOutput(ctx, st, req.Argv[0], stdout, stderr)
}

// startExec sends req and reads the guest's answer to it.
func startExec(st net.Conn, req ExecRequest) error {
	if err := WriteJSONLine(st, Request{Op: OpExec, Exec: &req}); err != nil {
		return err
	}
	resp, err := ReadResponse(st)
	if err != nil {
		return err
	}
	if !resp.OK {
		return errors.New(resp.Error)
	}
	return nil
}

// sendStdin copies stdin to the process in the background, then its end;
// with no stdin, the process sees the end at once.
func sendStdin(fw *FrameWriter, stdin io.Reader) {
	if stdin == nil {
		_ = fw.WriteFrame(FrameStdinEOF, nil)
		return
	}
	go func() {
		// Copy errors only mean the stream is gone; the frame loop
		// reports that.
		_, err := io.Copy(fw.Writer(FrameStdin), stdin)
		if err == nil {
			_ = fw.WriteFrame(FrameStdinEOF, nil)
		}
	}()
}

// sendResizes forwards terminal sizes until resize closes, the stream
// fails or done closes.
func sendResizes(fw *FrameWriter, resize <-chan [2]uint16, done <-chan struct{}) {
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
}

// readExecOutput copies the process's output frames to stdout and stderr
// until the exit frame, and returns its exit code.
func readExecOutput(ctx context.Context, st net.Conn, name string, stdout, stderr io.Writer) (int, error) {
	for {
		kind, payload, err := ReadFrame(st)
		if err != nil {
			if ctx.Err() != nil {
				return -1, fmt.Errorf("exec %s: %w", name, context.Cause(ctx))
			}
			return -1, fmt.Errorf("exec %s: stream ended before the exit code: %w", name, err)
		}
		switch kind {
		case FrameStdout:
			if _, err := stdout.Write(payload); err != nil {
				return -1, fmt.Errorf("exec %s: write stdout: %w", name, err)
			}
		case FrameStderr:
			if _, err := stderr.Write(payload); err != nil {
				return -1, fmt.Errorf("exec %s: write stderr: %w", name, err)
			}
		case FrameExit:
			return execExitCode(ctx, name, payload)
		}
	}
}

// execExitCode decodes the exit frame's payload.
func execExitCode(ctx context.Context, name string, payload []byte) (int, error) {
	// A yamux Close only half-closes, so the guest still reports the exit
	// of the process it killed for us: that is a cancel.
	if ctx.Err() != nil {
		return -1, fmt.Errorf("exec %s: %w", name, context.Cause(ctx))
	}
	var ex ExecExit
	if err := json.Unmarshal(payload, &ex); err != nil {
		return -1, fmt.Errorf("exec %s: bad exit frame: %w", name, err)
	}
	if ex.Error != "" {
		return -1, fmt.Errorf("exec %s: %s", name, ex.Error)
	}
	return ex.Code, nil
}
