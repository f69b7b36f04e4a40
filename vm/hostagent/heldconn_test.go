package hostagent

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/internal/connpipe"
)

// TestRelayedStreamPassesTheCLIsEndToTheGuest: when the CLI's end of a
// relayed agent stream closes, the guest's end reads EOF at once, though
// the guest has written nothing (a command that prints nothing would
// otherwise run on after an interrupted `vmdock ssh`), and the hold on
// the VM is released only once both ends are done.
func TestRelayedStreamPassesTheCLIsEndToTheGuest(t *testing.T) {
	hostSide, guestSide := net.Pipe()
	t.Cleanup(func() { hostSide.Close(); guestSide.Close() })
	guestSess, err := yamux.Server(guestSide, agent.YamuxConfig(slog.Default()))
	if err != nil {
		t.Fatal(err)
	}
	hostSess, err := yamux.Client(hostSide, agent.YamuxConfig(slog.Default()))
	if err != nil {
		t.Fatal(err)
	}
	st, err := hostSess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	held := &heldConn{Conn: st, release: func() { close(released) }}
	cli, relay := net.Pipe()
	go connpipe.Pipe(relay, held)
	guestSt, err := guestSess.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	cli.Close()
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(guestSt)
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatalf("the guest's end: %v, want a clean EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the guest's end never learned that the CLI went away")
	}
	select {
	case <-released:
		t.Fatal("the hold was released while the guest's end was still open")
	default:
	}
	guestSt.Close()
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("the hold was never released after both ends closed")
	}
}
