package syncmount

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/mutagen-io/mutagen/pkg/logging"
	"github.com/mutagen-io/mutagen/pkg/synchronization"
	"github.com/mutagen-io/mutagen/pkg/synchronization/endpoint/remote"
	// The local handler serves the host (alpha) side of every session.
	_ "github.com/mutagen-io/mutagen/pkg/synchronization/protocols/local"
	urlpkg "github.com/mutagen-io/mutagen/pkg/url"
)

// guestProtocol is the URL protocol slot of our guest handler. Sessions are
// saved with their URLs, and URL.EnsureValid drops sessions whose protocol it
// does not know when the manager loads them, so we borrow the SSH slot.
// Mutagen's own SSH handler is never linked in (license_test.go checks).
const guestProtocol = urlpkg.Protocol_SSH

// guestHost is the host name in beta URLs. The SSH slot requires a non-empty
// host; ours only marks the URL as vmdock's.
const guestHost = "vmdock-guest"

// handshakeTimeout bounds Mutagen's connection handshake with a guest that
// accepted the stream but does not answer (for example an old guest agent).
const handshakeTimeout = 30 * time.Second

// DialFunc opens a new stream to the guest's sync service.
type DialFunc func(ctx context.Context) (net.Conn, error)

// errNoManager is returned when a session tries to connect while no Manager
// of this process is open.
var errNoManager = errors.New("no vmdock sync manager is open in this process")

// open is the open Manager. ProtocolHandlers may only change during init, so
// the one handler we register looks the Manager up per call.
var open struct {
	sync.Mutex
	m *Manager
}

func setOpenManager(m *Manager) error {
	open.Lock()
	defer open.Unlock()
	if m != nil && open.m != nil {
		return errors.New("another sync Manager is already open in this process")
	}
	open.m = m
	return nil
}

func openManager() *Manager {
	open.Lock()
	defer open.Unlock()
	return open.m
}

type guestHandler struct{}

func init() {
	synchronization.ProtocolHandlers[guestProtocol] = guestHandler{}
}

// Connect opens a stream to the guest and runs Mutagen's remote endpoint
// client on it.
func (guestHandler) Connect(
	ctx context.Context,
	logger *logging.Logger,
	url *urlpkg.URL,
	_ string,
	session string,
	version synchronization.Version,
	configuration *synchronization.Configuration,
	alpha bool,
) (synchronization.Endpoint, error) {
	if url.Kind != urlpkg.Kind_Synchronization || url.Host != guestHost {
		return nil, fmt.Errorf("not a vmdock guest URL: %s", url.Format("\n"))
	}
	m := openManager()
	if m == nil {
		return nil, errNoManager
	}
	conn, err := m.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("open sync stream to guest: %w", err)
	}
	stream := wrapConn(conn)
	endpoint, err := handshake(ctx, logger, stream, url.Path, session, version, configuration, alpha)
	if errors.Is(err, errFreshGuest) {
		m.freshGuest(session)
	}
	return endpoint, err
}

// handshake runs our preamble and remote.NewEndpoint with a deadline and
// ctx cancellation, then clears the deadline for the long-lived session.
func handshake(
	ctx context.Context,
	logger *logging.Logger,
	stream *closingConn,
	root, session string,
	version synchronization.Version,
	configuration *synchronization.Configuration,
	alpha bool,
) (synchronization.Endpoint, error) {
	if err := stream.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		stream.Close()
		return nil, fmt.Errorf("set handshake deadline: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { stream.Close() })
	if err := hostPreamble(stream, session, alpha); err != nil {
		stop()
		stream.Close()
		return nil, err
	}
	endpoint, err := remote.NewEndpoint(logger, stream, root, session, version, configuration, alpha)
	stopped := stop()
	if err != nil {
		return nil, fmt.Errorf("sync handshake with guest: %w", err)
	}
	if !stopped {
		endpoint.Shutdown()
		return nil, fmt.Errorf("sync handshake with guest: %w", ctx.Err())
	}
	if err := stream.SetDeadline(time.Time{}); err != nil {
		endpoint.Shutdown()
		return nil, fmt.Errorf("clear handshake deadline: %w", err)
	}
	return endpoint, nil
}
