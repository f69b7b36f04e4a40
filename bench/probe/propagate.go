package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// ServeFiles is the guest side of the propagation measurement. It reads
// requests from r, one per line, and answers each on w with "ok" or an
// error line:
//
//	await PATH CONTENT  wait until PATH holds CONTENT (polling every 1 ms)
//	write PATH CONTENT  write CONTENT to PATH
//
// A request carries no timing: the host times the round trip, and an
// "await" of content that is already there measures the channel alone.
func ServeFiles(r io.Reader, w io.Writer, timeout time.Duration) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		op, rest, _ := strings.Cut(sc.Text(), " ")
		path, content, ok := strings.Cut(rest, " ")
		if !ok {
			return fmt.Errorf("request %q: want OP PATH CONTENT", sc.Text())
		}
		var err error
		switch op {
		case "await":
			err = awaitContent(path, content, timeout)
		case "write":
			err = os.WriteFile(path, []byte(content), 0o644)
		default:
			err = fmt.Errorf("op %q: accepted: await, write", op)
		}
		answer := "ok"
		if err != nil {
			answer = "error " + err.Error()
		}
		if _, err := fmt.Fprintln(w, answer); err != nil {
			return err
		}
	}
	return sc.Err()
}

func awaitContent(path, content string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	want := []byte(content)
	for {
		if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no %q within %s", path, content, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}
