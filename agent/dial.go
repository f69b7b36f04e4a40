package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// DialFunc opens the raw channel to the guest agent (virtio-serial or vsock).
type DialFunc func(ctx context.Context) (net.Conn, error)

// RetryOptions tune DialUntilUp. The zero value retries every second,
// each attempt bounded by 20 s.
type RetryOptions struct {
	// AttemptTimeout bounds one dial + handshake + info.
	AttemptTimeout time.Duration
	// Delay is the wait after the first failed attempt; it doubles after
	// each failure up to MaxDelay (MaxDelay <= Delay: a fixed delay).
	Delay, MaxDelay time.Duration
	// Check runs before every attempt; its error ends the retries (the VM
	// exited, its console shows a panic): no guest agent is coming.
	Check func() error
	// Prepare runs on each new client before Info, for handlers that must
	// be in place as soon as the session is up.
	Prepare func(*Client)
	// Failed is told about each failed attempt, for logging.
	Failed func(attempt int, err error)
}

// ErrNotUp wraps the last attempt's error when ctx ends before the guest
// agent answered.
var ErrNotUp = errors.New("the guest agent did not answer")

// DialOnce dials, completes the handshake and asks the guest agent for its
// Info, within ctx.
func DialOnce(ctx context.Context, dial DialFunc, prepare func(*Client)) (*Client, Info, error) {
	conn, err := dial(ctx)
	if err != nil {
		return nil, Info{}, err
	}
	c, err := Connect(ctx, conn)
	if err != nil {
		return nil, Info{}, err
	}
	if prepare != nil {
		prepare(c)
	}
	info, err := c.Info(ctx)
	if err != nil {
		c.Close()
		return nil, Info{}, err
	}
	return c, info, nil
}

// DialUntilUp retries DialOnce until the guest agent answers, Check
// fails, or ctx ends (ErrNotUp, with the last attempt's error).
func DialUntilUp(ctx context.Context, dial DialFunc, o RetryOptions) (*Client, Info, error) {
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 20 * time.Second
	}
	if o.Delay <= 0 {
		o.Delay = time.Second
	}
	delay := o.Delay
	var last error
	for attempt := 1; ; attempt++ {
		if o.Check != nil {
			if err := o.Check(); err != nil {
				return nil, Info{}, err
			}
		}
		if ctx.Err() != nil {
			return nil, Info{}, fmt.Errorf("%w (last error: %v): %w", ErrNotUp, last, ctx.Err())
		}
		actx, cancel := context.WithTimeout(ctx, o.AttemptTimeout)
		c, info, err := DialOnce(actx, dial, o.Prepare)
		cancel()
		if err == nil {
			return c, info, nil
		}
		last = err
		if o.Failed != nil {
			o.Failed(attempt, err)
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
		if o.MaxDelay > delay {
			delay = min(2*delay, o.MaxDelay)
		}
	}
}
