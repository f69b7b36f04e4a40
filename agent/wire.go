package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hashicorp/yamux"
)

// maxLine bounds a JSON request/response line so a confused peer cannot make
// us buffer without limit.
const maxLine = 1 << 20

// readLine reads up to and including '\n' one byte at a time: whatever
// follows the line belongs to the stream's payload and must stay unread.
func readLine(r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	b := make([]byte, 1)
	for {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				return buf.Bytes(), nil
			}
			if buf.Len() >= maxLine {
				return nil, fmt.Errorf("line longer than %d bytes", maxLine)
			}
			buf.WriteByte(b[0])
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && buf.Len() > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// WriteJSONLine writes v as one JSON line.
func WriteJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadJSONLine reads one JSON line into v without reading past it.
func ReadJSONLine(r io.Reader, v any) error {
	line, err := readLine(r)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("decode %q: %w", truncate(line), err)
	}
	return nil
}

// Reply answers a stream's Request: OK when err is nil, else the error text.
// Handlers of guest-opened streams (HandleGuestStreams) call it before
// copying bytes.
func Reply(w io.Writer, err error) error {
	if err != nil {
		return WriteJSONLine(w, Response{Error: err.Error()})
	}
	return WriteJSONLine(w, Response{OK: true})
}

// ReadResponse reads the Response line and turns a refusal into an error.
func ReadResponse(r io.Reader) (Response, error) {
	var resp Response
	if err := ReadJSONLine(r, &resp); err != nil {
		return resp, fmt.Errorf("read response: %w", err)
	}
	if !resp.OK {
		msg := resp.Error
		if msg == "" {
			msg = "refused without a reason"
		}
		return resp, errors.New(msg)
	}
	return resp, nil
}

func truncate(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

// MaxFrameSize bounds one yamux frame on the wire: a 12-byte header and at
// most a full stream window of data (YamuxConfig keeps yamux's 256 KiB).
const MaxFrameSize = 12 + 256*1024

// YamuxConfig is shared by both ends. Each runs a Keepalive (yamux's own
// is off: it cannot be suspended while the VM is paused), so a dead peer
// (guest frozen, host agent killed) ends the session within about a
// minute.
func YamuxConfig(log *slog.Logger) *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.EnableKeepAlive = false
	cfg.ConnectionWriteTimeout = 30 * time.Second
	cfg.StreamOpenTimeout = 30 * time.Second
	cfg.LogOutput = nil
	// yamux logs only what went wrong (a keepalive missed, a bad frame):
	// the one clue to why a session ended, so it is kept at Info.
	cfg.Logger = slog.NewLogLogger(log.Handler(), slog.LevelInfo)
	return cfg
}
