package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// qmp is a minimal synchronous QMP client: one command at a time,
// asynchronous events skipped. QEMU serves one QMP client per socket, so
// the machine keeps a single connection for its whole life.
type qmp struct {
	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
}

type qmpError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *qmpError) Error() string { return e.Class + ": " + e.Desc }

type qmpReply struct {
	Return json.RawMessage `json:"return"`
	Error  *qmpError       `json:"error"`
	Event  string          `json:"event"`
	QMP    json.RawMessage `json:"QMP"`
}

// qmpDefaultTimeout bounds a command whose ctx has no deadline, so a
// wedged qemu cannot hang the host agent.
const qmpDefaultTimeout = 10 * time.Second

// dialQMP connects, reads the greeting and leaves capabilities
// negotiation mode, after which QEMU accepts commands.
func dialQMP(ctx context.Context, path string) (*qmp, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	q := &qmp{conn: conn, r: bufio.NewReader(conn)}
	q.setDeadline(ctx)
	var greet qmpReply
	if err := q.read(&greet); err != nil {
		conn.Close()
		return nil, fmt.Errorf("read QMP greeting: %w", err)
	}
	if greet.QMP == nil {
		conn.Close()
		return nil, errors.New("read QMP greeting: not a QMP server")
	}
	if err := q.execute(ctx, "qmp_capabilities", nil, nil); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

func (q *qmp) setDeadline(ctx context.Context) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(qmpDefaultTimeout)
	}
	_ = q.conn.SetDeadline(dl)
}

func (q *qmp) read(v *qmpReply) error {
	line, err := q.r.ReadBytes('\n')
	if err != nil {
		return err
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("decode QMP message %q: %w", line, err)
	}
	return nil
}

// execute runs one command and decodes its "return" into out (if non-nil).
func (q *qmp) execute(ctx context.Context, cmd string, args, out any) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.setDeadline(ctx)
	// A cancelled ctx must also unblock a read that is already waiting.
	stop := context.AfterFunc(ctx, func() { _ = q.conn.SetDeadline(time.Now()) })
	defer stop()

	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode QMP %s: %w", cmd, err)
	}
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("send QMP %s: %w", cmd, err)
	}
	return q.readReply(ctx, cmd, out)
}

// readReply reads until cmd's reply, skipping events, and decodes its
// "return" into out (if non-nil).
func (q *qmp) readReply(ctx context.Context, cmd string, out any) error {
	for {
		var rep qmpReply
		if err := q.read(&rep); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("QMP %s: %w", cmd, ctx.Err())
			}
			return fmt.Errorf("QMP %s: %w", cmd, err)
		}
		switch {
		case rep.Event != "":
			continue
		case rep.Error != nil:
			return fmt.Errorf("QMP %s: %w", cmd, rep.Error)
		case rep.Return != nil:
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(rep.Return, out); err != nil {
				return fmt.Errorf("decode QMP %s reply: %w", cmd, err)
			}
			return nil
		}
	}
}

func (q *qmp) Close() error { return q.conn.Close() }

// isEOF reports a connection QEMU closed, which after quit or powerdown
// means success rather than failure.
func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed)
}

// executeWithFile runs cmd (getfd, add-fd) with f's descriptor attached
// to the command's bytes (SCM_RIGHTS), as QMP expects.
func (q *qmp) executeWithFile(ctx context.Context, cmd string, args any, f *os.File) error {
	uc, ok := q.conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("QMP %s: passing a file needs a unix socket", cmd)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.setDeadline(ctx)
	stop := context.AfterFunc(ctx, func() { _ = q.conn.SetDeadline(time.Now()) })
	defer stop()
	b, err := json.Marshal(map[string]any{"execute": cmd, "arguments": args})
	if err != nil {
		return fmt.Errorf("encode QMP %s: %w", cmd, err)
	}
	if _, _, err := uc.WriteMsgUnix(append(b, '\n'), unix.UnixRights(int(f.Fd())), nil); err != nil {
		return fmt.Errorf("send QMP %s: %w", cmd, err)
	}
	return q.readReply(ctx, cmd, nil)
}
