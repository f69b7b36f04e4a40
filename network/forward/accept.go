package forward

import (
	"errors"
	"log/slog"
	"net"
	"syscall"
	"time"
)

// Accept back-off bounds: a process out of file descriptors frees them as
// connections end, so retrying soon is right, but not in a tight loop.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// serveAccept accepts on ln and hands every connection to handle until ln
// is closed or fails for good; handle returns false to stop the loop.
// Errors that pass (out of file descriptors, a peer that gave up before
// accept) are retried with a growing pause, logged once per streak: one
// EMFILE must not end a forwarder for the rest of the run.
func serveAccept(ln net.Listener, log *slog.Logger, handle func(net.Conn) bool) error {
	var (
		delay  time.Duration
		failed int
	)
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || !temporaryAcceptError(err) {
				return err
			}
			if failed == 0 {
				log.Warn("accept failed; retrying", "err", err)
			}
			failed++
			delay = min(max(2*delay, acceptBackoffMin), acceptBackoffMax)
			time.Sleep(delay)
			continue
		}
		if failed > 0 {
			log.Info("accepting again", "failed attempts", failed)
			failed, delay = 0, 0
		}
		if !handle(c) {
			return nil
		}
	}
}

// temporaryAcceptError is true for accept errors that say nothing about
// the listener itself.
func temporaryAcceptError(err error) bool {
	for _, e := range []syscall.Errno{
		syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
