package syncmount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/mutagen-io/mutagen/pkg/synchronization/endpoint/remote"
)

// GuestDataDir is the suggested GuestOptions.DataDir: on the data disk, next
// to the guest copies, so staging renames stay on one file system.
const GuestDataDir = "/var/lib/vmdock/sync/.mutagen"

// GuestOptions configure the guest side.
type GuestOptions struct {
	// DataDir is Mutagen's data directory in the guest (staging files and
	// scan caches). It must be absolute and should live on the same file
	// system as the guest copies, e.g. GuestDataDir.
	DataDir string
	// Logger receives Mutagen's log; nil means slog.Default().
	Logger *slog.Logger
}

// Serve runs one Mutagen endpoint server on conn until the host closes the
// stream, the endpoint fails, or ctx ends. It always closes conn. One host
// session opens one stream per connection attempt, so the guest agent calls
// Serve once per accepted sync stream, each in its own goroutine.
//
// A normal end (host closed the stream, ctx cancelled) returns nil.
func Serve(ctx context.Context, conn net.Conn, opts GuestOptions) error {
	stream := wrapConn(conn)
	release, err := acquireDataDir(opts.DataDir)
	if err != nil {
		stream.Close()
		return fmt.Errorf("sync endpoint: %w", err)
	}
	defer release()
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	// ServeEndpoint only returns once the stream fails or is closed.
	stop := context.AfterFunc(ctx, func() { stream.Close() })
	defer stop()
	if err := servePreamble(stream); err != nil {
		stream.Close()
		if ctx.Err() != nil || isStreamEnd(err) {
			return nil
		}
		return fmt.Errorf("sync endpoint: %w", err)
	}
	err = remote.ServeEndpoint(newMutagenLogger(log.With("side", "guest")), stream)
	if ctx.Err() != nil || isStreamEnd(err) {
		return nil
	}
	return fmt.Errorf("sync endpoint: %w", err)
}

// servePreamble runs the guest half of the preamble under a deadline: a
// host that opened the stream but never speaks must not pin a goroutine.
func servePreamble(stream *closingConn) error {
	if err := stream.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return fmt.Errorf("set preamble deadline: %w", err)
	}
	if err := guestPreamble(stream); err != nil {
		return err
	}
	if err := stream.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("clear preamble deadline: %w", err)
	}
	return nil
}

// isStreamEnd reports errors that only mean "the other side went away".
func isStreamEnd(err error) bool {
	return err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF)
}

// PrepareGuestCopy creates the guest copy folder of a sync mount (and its
// parents) before the guest agent bind-mounts it, owned by uid:gid (negative:
// leave as is) with DefaultDirMode. created says the folder did not exist
// (for the log; the host side detects a new guest copy by itself).
//
// Bind-mount the folder itself, never recreate it while mounted: a bind
// mount keeps pointing at the old inode.
func PrepareGuestCopy(dir string, uid, gid int) (created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(dir), DefaultDirMode); err != nil {
		return false, fmt.Errorf("create parent of guest copy: %w", err)
	}
	err = os.Mkdir(dir, DefaultDirMode)
	if errors.Is(err, fs.ErrExist) {
		return false, checkDir("guest copy", dir)
	}
	if err != nil {
		return false, fmt.Errorf("create guest copy: %w", err)
	}
	// Mkdir applies the umask; the copy's root must be exactly 0755.
	if err := os.Chmod(dir, DefaultDirMode); err != nil {
		return true, fmt.Errorf("chmod guest copy: %w", err)
	}
	if uid >= 0 || gid >= 0 {
		if err := os.Lchown(dir, uid, gid); err != nil {
			return true, fmt.Errorf("chown guest copy: %w", err)
		}
	}
	return true, nil
}
