package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// Only a frame boundary is a clean end; a length beyond maxFrame is
// refused before anything is allocated for it.
func TestReadFrameErrors(t *testing.T) {
	if _, _, err := ReadFrame(bytes.NewReader(nil)); err != io.EOF {
		t.Errorf("end at a boundary: %v; want io.EOF", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{FrameStdout, 0, 0})); err != io.ErrUnexpectedEOF {
		t.Errorf("end inside the header: %v; want io.ErrUnexpectedEOF", err)
	}
	var buf bytes.Buffer
	if err := NewFrameWriter(&buf).WriteFrame(FrameStdout, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	short := buf.Bytes()[:buf.Len()-2]
	if _, _, err := ReadFrame(bytes.NewReader(short)); err != io.ErrUnexpectedEOF {
		t.Errorf("end inside the payload: %v; want io.ErrUnexpectedEOF", err)
	}
	hdr := []byte{FrameStdout, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[1:], maxFrame+1)
	if _, _, err := ReadFrame(bytes.NewReader(hdr)); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("oversized frame: %v", err)
	}
}

// A kind writer sends no frame for an empty write and passes on a write
// error without claiming bytes written.
func TestFrameKindWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewFrameWriter(&buf).Writer(FrameStderr)
	if n, err := w.Write(nil); n != 0 || err != nil || buf.Len() != 0 {
		t.Fatalf("empty write: %d, %v, wrote %d bytes", n, err, buf.Len())
	}
	broken := NewFrameWriter(failWriter{}).Writer(FrameStderr)
	if n, err := broken.Write([]byte("x")); n != 0 || err == nil {
		t.Fatalf("write to a broken stream: %d, %v", n, err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }
