package syncmount

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mutagen-io/mutagen/pkg/filesystem"
)

// Before Mutagen's own handshake, host and guest exchange one line each way
// so that a guest copy on a new data disk is never read against old sync
// history. Mutagen's emptied-root guard only covers roots that held two or
// more entries; with one entry, or with a container that wrote a file into
// the fresh copy before the first sync, the history would turn every missing
// file into a deletion on the host.
//
//	host:  "VMDOCK-SYNC 1 <session> <alpha|beta>\n"
//	guest: "KNOWN\n" (this data disk served the session before) or "NEW\n"
//	host:  "GO\n", then Mutagen's protocol; or it closes the stream and
//	       resets the session's history first.
//
// The guest records the session as known only after GO, so an interrupted
// reset is retried on the next connection.
const (
	preambleMagic = "VMDOCK-SYNC 1"
	replyKnown    = "KNOWN"
	replyNew      = "NEW"
	replyGo       = "GO"
	// maxPreambleLine bounds what a guest reads before Mutagen takes over.
	maxPreambleLine = 256
)

var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,128}$`)

// errFreshGuest means the guest has never served the session while the host
// holds sync history for it.
var errFreshGuest = errors.New("guest copy is new (new data disk?) but the session has sync history")

func endpointName(alpha bool) string {
	if alpha {
		return "alpha"
	}
	return "beta"
}

// hostPreamble runs the host half. It returns errFreshGuest when the
// session's history must be reset before syncing with this guest.
func hostPreamble(rw io.ReadWriter, session string, alpha bool) error {
	if _, err := fmt.Fprintf(rw, "%s %s %s\n", preambleMagic, session, endpointName(alpha)); err != nil {
		return fmt.Errorf("send sync preamble: %w", err)
	}
	reply, err := readLine(rw)
	if err != nil {
		return fmt.Errorf("read sync preamble reply: %w", err)
	}
	switch reply {
	case replyKnown:
	case replyNew:
		history, err := hasHistory(session)
		if err != nil {
			return err
		}
		if history {
			return errFreshGuest
		}
	default:
		return fmt.Errorf("sync preamble: guest replied %q", reply)
	}
	if _, err := io.WriteString(rw, replyGo+"\n"); err != nil {
		return fmt.Errorf("send sync go: %w", err)
	}
	return nil
}

// guestPreamble runs the guest half.
func guestPreamble(rw io.ReadWriter) error {
	line, err := readLine(rw)
	if err != nil {
		return fmt.Errorf("read sync preamble: %w", err)
	}
	session, side, ok := parsePreamble(line)
	if !ok {
		return fmt.Errorf("bad sync preamble %q", line)
	}
	marker, err := markerPath(session, side)
	if err != nil {
		return err
	}
	reply := replyNew
	if _, err := os.Stat(marker); err == nil {
		reply = replyKnown
	}
	if _, err := io.WriteString(rw, reply+"\n"); err != nil {
		return fmt.Errorf("send sync preamble reply: %w", err)
	}
	if line, err = readLine(rw); err != nil {
		return fmt.Errorf("wait for sync go: %w", err)
	}
	if line != replyGo {
		return fmt.Errorf("sync preamble: host sent %q", line)
	}
	if reply == replyNew {
		return writeMarker(marker)
	}
	return nil
}

func parsePreamble(line string) (session, side string, ok bool) {
	rest, ok := strings.CutPrefix(line, preambleMagic+" ")
	if !ok {
		return "", "", false
	}
	session, side, ok = strings.Cut(rest, " ")
	if !ok || !sessionIDPattern.MatchString(session) || (side != "alpha" && side != "beta") {
		return "", "", false
	}
	return session, side, true
}

// readLine reads one line byte by byte: nothing after it may be consumed,
// since Mutagen reads the rest of the stream.
func readLine(r io.Reader) (string, error) {
	var b strings.Builder
	buf := make([]byte, 1)
	for b.Len() < maxPreambleLine {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		if buf[0] == '\n' {
			return b.String(), nil
		}
		b.WriteByte(buf[0])
	}
	return "", errors.New("sync preamble line too long")
}

// markerPath is where the guest notes that it served a session endpoint.
// It lives in the Mutagen data directory, on the same disk as the copies.
func markerPath(session, side string) (string, error) {
	dir, err := filesystem.Mutagen(false, "vmdock-served")
	if err != nil {
		return "", fmt.Errorf("sync marker directory: %w", err)
	}
	return filepath.Join(dir, session+"_"+side), nil
}

func writeMarker(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create sync marker directory: %w", err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return fmt.Errorf("write sync marker: %w", err)
	}
	return nil
}

// hasHistory reports whether the host keeps a sync ancestor for session.
// An archive without content is an empty protobuf message: zero bytes.
func hasHistory(session string) (bool, error) {
	if !sessionIDPattern.MatchString(session) {
		return false, fmt.Errorf("bad session id %q", session)
	}
	path, err := filesystem.Mutagen(false, filesystem.MutagenSynchronizationArchivesDirectoryName, session)
	if err != nil {
		return false, fmt.Errorf("sync archive path: %w", err)
	}
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sync archive: %w", err)
	}
	return info.Size() > 0, nil
}
