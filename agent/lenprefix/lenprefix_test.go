package lenprefix

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

func TestReadWrite(t *testing.T) {
	max := bytes.Repeat([]byte{7}, Max)
	tests := []struct {
		name    string
		payload []byte
		bufSize int
		wantN   int
		wantErr error
	}{
		{"empty", []byte{}, 100, 0, nil},
		{"small", []byte("hello"), 100, 5, nil},
		{"exactly the buffer", []byte("hello"), 5, 5, nil},
		{"max size", max, Max, Max, nil},
		{"short buffer", []byte("hello world"), 5, 5, io.ErrShortBuffer},
		{"max size into a short buffer", max, 512, 512, io.ErrShortBuffer},
		{"zero buffer", []byte("x"), 0, 0, io.ErrShortBuffer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stream bytes.Buffer
			if err := Write(&stream, tt.payload); err != nil {
				t.Fatal(err)
			}
			if err := Write(&stream, []byte("next")); err != nil {
				t.Fatal(err)
			}
			if want := 2 + len(tt.payload) + 2 + 4; stream.Len() != want {
				t.Fatalf("stream length %d, want %d", stream.Len(), want)
			}
			buf := make([]byte, tt.bufSize)
			// One byte per Read call: a frame split over many reads of a
			// real conn must come out the same.
			r := iotest.OneByteReader(&stream)
			n, err := Read(r, buf)
			if n != tt.wantN || err != tt.wantErr {
				t.Fatalf("Read = %d, %v; want %d, %v", n, err, tt.wantN, tt.wantErr)
			}
			if !bytes.Equal(buf[:n], tt.payload[:n]) {
				t.Fatal("payload differs")
			}
			// The stream stays in sync on frames after a short buffer.
			n, err = Read(r, make([]byte, 100))
			if err != nil || n != 4 {
				t.Fatalf("following frame: %d, %v", n, err)
			}
			if _, err := Read(r, buf); err != io.EOF {
				t.Fatalf("end of stream: %v, want io.EOF", err)
			}
		})
	}
}

func TestReadFrame(t *testing.T) {
	var stream bytes.Buffer
	for _, p := range [][]byte{[]byte("dns"), {}, bytes.Repeat([]byte{1}, Max)} {
		if err := Write(&stream, p); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFrame(&stream)
		if err != nil || !bytes.Equal(got, p) || len(got) != cap(got) {
			t.Fatalf("ReadFrame = %d bytes (cap %d), %v; want %d bytes", len(got), cap(got), err, len(p))
		}
	}
	if _, err := ReadFrame(&stream); err != io.EOF {
		t.Fatalf("end of stream: %v, want io.EOF", err)
	}
}

func TestWriteTooLarge(t *testing.T) {
	var stream bytes.Buffer
	if err := Write(&stream, make([]byte, Max+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized write: %v, want ErrTooLarge", err)
	}
	if stream.Len() != 0 {
		t.Errorf("an oversized write wrote %d bytes", stream.Len())
	}
}

func TestEOFInsideFrame(t *testing.T) {
	tests := []struct {
		name   string
		stream []byte
	}{
		{"half a header", []byte{0}},
		{"header only", []byte{0, 5}},
		{"short payload", []byte{0, 5, 'a', 'b'}},
		{"short tail of a truncated frame", []byte{0, 20, 'a', 'b', 'c', 'd', 'e', 'f'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Read(bytes.NewReader(tt.stream), make([]byte, 4))
			if !errors.Is(err, io.ErrUnexpectedEOF) || n != 0 {
				t.Errorf("Read = %d, %v; want 0, io.ErrUnexpectedEOF", n, err)
			}
			if _, err := ReadFrame(bytes.NewReader(tt.stream)); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("ReadFrame: %v, want io.ErrUnexpectedEOF", err)
			}
		})
	}
}

func TestReadPassesConnErrors(t *testing.T) {
	// Before a frame starts, the conn's own error comes back as it is, so
	// a type check for a timeout still works.
	a, b := net.Pipe()
	defer b.Close()
	a.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := Read(a, make([]byte, 10)); err == nil || !isTimeout(err) {
		t.Errorf("deadline: %v, want a net.Error timeout", err)
	}
	a.Close()
	if _, err := Read(a, make([]byte, 10)); err != io.ErrClosedPipe {
		t.Errorf("closed: %v, want io.ErrClosedPipe", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestConcurrentWritersKeepFrames(t *testing.T) {
	// Each frame is one Write call, so writers that serialise on the conn
	// (net.Pipe does) never interleave header and payload.
	a, b := net.Pipe()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := bytes.Repeat([]byte{byte('a' + w)}, 1000+w)
			for range 50 {
				if err := Write(a, p); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); a.Close() }()
	buf := make([]byte, Max)
	frames := 0
	for {
		n, err := Read(b, buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		w := int(buf[0] - 'a')
		if n != 1000+w || !bytes.Equal(buf[:n], bytes.Repeat(buf[:1], n)) {
			t.Fatalf("frame %d mixes writers: %d bytes starting %q", frames, n, buf[0])
		}
		frames++
	}
	if frames != 200 {
		t.Errorf("%d frames, want 200", frames)
	}
}
