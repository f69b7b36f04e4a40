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
// the machine keeps a single connection, made again only after a command
// whose reply was never read.
type qmp struct {
	path string

	mu   sync.Mutex
	conn net.Conn // replaced under both mu and connMu
	r    *bufio.Reader
	// lastID numbers the commands; each reply carries its command's id.
	lastID uint64
	// lost: a command was sent and its reply not read (a cut read, a
	// timeout). QEMU still sends that reply and may still be busy with
	// the command, so the next command starts on a new connection.
	lost bool

	// connMu lets Close end a command stuck in a read, which holds mu.
	connMu sync.Mutex
	closed bool
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
	ID     uint64          `json:"id"`
}

// qmpDefaultTimeout bounds a command whose ctx has no deadline, so a
// wedged qemu cannot hang the host agent.
const qmpDefaultTimeout = 10 * time.Second

// dialQMP connects, reads the greeting and leaves capabilities
// negotiation mode, after which QEMU accepts commands.
func dialQMP(ctx context.Context, path string) (*qmp, error) {
	q := &qmp{path: path}
	if err := q.connect(ctx); err != nil {
		return nil, err
	}
	return q, nil
}

// connect opens a session on q.path; q.mu is held or q is not shared yet.
func (q *qmp) connect(ctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", q.path)
	if err != nil {
		return err
	}
	q.connMu.Lock()
	if q.closed {
		q.connMu.Unlock()
		conn.Close()
		return net.ErrClosed
	}
	q.conn = conn
	q.connMu.Unlock()
	q.r, q.lost = bufio.NewReader(conn), false
	q.setDeadline(ctx)
	var greet qmpReply
	if err := q.read(&greet); err != nil {
		conn.Close()
		return fmt.Errorf("read QMP greeting: %w", err)
	}
	if greet.QMP == nil {
		conn.Close()
		return errors.New("read QMP greeting: not a QMP server")
	}
	if err := q.roundTrip(ctx, "qmp_capabilities", nil, nil, nil); err != nil {
		conn.Close()
		return err
	}
	return nil
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
	return q.do(ctx, cmd, args, nil, out)
}

// executeWithFile runs cmd (getfd, add-fd) with f's descriptor attached
// to the command's bytes (SCM_RIGHTS), as QMP expects.
func (q *qmp) executeWithFile(ctx context.Context, cmd string, args any, f *os.File) error {
	return q.do(ctx, cmd, args, f, nil)
}

// do runs one command on a session that is in step: one whose last
// reply went unread is replaced first.
func (q *qmp) do(ctx context.Context, cmd string, args any, f *os.File, out any) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lost {
		q.conn.Close()
		if err := q.connect(ctx); err != nil {
			q.lost = true
			return fmt.Errorf("QMP %s: reconnect after a lost reply: %w", cmd, err)
		}
	}
	return q.roundTrip(ctx, cmd, args, f, out)
}

// roundTrip sends cmd with a new id (and f's descriptor, if any) and reads
// its reply; q.mu is held.
func (q *qmp) roundTrip(ctx context.Context, cmd string, args any, f *os.File, out any) error {
	q.setDeadline(ctx)
	// A cancelled ctx must also unblock a read that is already waiting.
	stop := context.AfterFunc(ctx, func() { _ = q.conn.SetDeadline(time.Now()) })
	defer stop()

	q.lastID++
	id := q.lastID
	req := map[string]any{"execute": cmd, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode QMP %s: %w", cmd, err)
	}
	if err := q.send(append(b, '\n'), f); err != nil {
		// Part of the command may have gone out: its reply may come.
		q.lost = true
		return fmt.Errorf("send QMP %s: %w", cmd, err)
	}
	return q.readReply(ctx, cmd, id, out)
}

func (q *qmp) send(b []byte, f *os.File) error {
	if f == nil {
		_, err := q.conn.Write(b)
		return err
	}
	uc, ok := q.conn.(*net.UnixConn)
	if !ok {
		return errors.New("passing a file needs a unix socket")
	}
	_, _, err := uc.WriteMsgUnix(b, unix.UnixRights(int(f.Fd())), nil)
	return err
}

// readReply reads until the reply to command id, skipping events and
// replies to earlier commands, and decodes its "return" into out (if
// non-nil). A reply without an id is taken as this one's: QEMU sends one
// for a command it could not parse.
func (q *qmp) readReply(ctx context.Context, cmd string, id uint64, out any) error {
	for {
		var rep qmpReply
		if err := q.read(&rep); err != nil {
			q.lost = true
			if ctx.Err() != nil {
				return fmt.Errorf("QMP %s: %w", cmd, ctx.Err())
			}
			return fmt.Errorf("QMP %s: %w", cmd, err)
		}
		switch {
		case rep.Event != "":
			continue
		case rep.ID != 0 && rep.ID != id:
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

func (q *qmp) Close() error {
	q.connMu.Lock()
	defer q.connMu.Unlock()
	q.closed = true
	return q.conn.Close()
}

// isEOF reports a connection QEMU closed, which after quit or powerdown
// means success rather than failure.
func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed)
}
