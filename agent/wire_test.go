package agent

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// A JSON line is read without reading past it: what follows belongs to
// the stream's payload.
func TestReadJSONLineLeavesThePayload(t *testing.T) {
	r := strings.NewReader(`{"ok":true}` + "\npayload")
	var resp Response
	if err := ReadJSONLine(r, &resp); err != nil || !resp.OK {
		t.Fatalf("ReadJSONLine = %+v, %v", resp, err)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "payload" {
		t.Fatalf("left %q, want the payload untouched", rest)
	}
}

func TestReadJSONLineErrors(t *testing.T) {
	var v Response
	if err := ReadJSONLine(strings.NewReader(""), &v); err != io.EOF {
		t.Errorf("empty stream: %v; want io.EOF (a clean end)", err)
	}
	if err := ReadJSONLine(strings.NewReader(`{"ok":tr`), &v); err != io.ErrUnexpectedEOF {
		t.Errorf("stream ending inside a line: %v; want io.ErrUnexpectedEOF", err)
	}
	long := strings.Repeat("x", 200) + "\n"
	err := ReadJSONLine(strings.NewReader(long), &v)
	if err == nil || !strings.Contains(err.Error(), "decode") || strings.Contains(err.Error(), strings.Repeat("x", 81)) {
		t.Errorf("garbage line: %v; want a decode error quoting at most 80 bytes", err)
	}
	err = ReadJSONLine(io.MultiReader(strings.NewReader(strings.Repeat("x", maxLine+1)), strings.NewReader("\n")), &v)
	if err == nil || !strings.Contains(err.Error(), "line longer than") {
		t.Errorf("over-long line: %v", err)
	}
}

func TestReplyAndReadResponse(t *testing.T) {
	var buf bytes.Buffer
	if err := Reply(&buf, nil); err != nil {
		t.Fatal(err)
	}
	if resp, err := ReadResponse(&buf); err != nil || !resp.OK {
		t.Fatalf("OK reply read as %+v, %v", resp, err)
	}
	if err := Reply(&buf, errors.New("connection refused")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadResponse(&buf); err == nil || err.Error() != "connection refused" {
		t.Fatalf("refusal read as %v; want the peer's reason", err)
	}
	buf.WriteString(`{"ok":false}` + "\n")
	if _, err := ReadResponse(&buf); err == nil || err.Error() != "refused without a reason" {
		t.Fatalf("refusal without a reason read as %v", err)
	}
	buf.WriteString("not json\n")
	if _, err := ReadResponse(&buf); err == nil || !strings.HasPrefix(err.Error(), "read response: ") {
		t.Fatalf("garbage read as %v", err)
	}
	if _, err := ReadResponse(&buf); !errors.Is(err, io.EOF) {
		t.Fatalf("closed stream read as %v; want it to wrap io.EOF", err)
	}
}
