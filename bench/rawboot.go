package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/vm/driver"
)

// MetricToHello is the boot metric RawBoot's baseline and `vmdock start`
// share: from starting the VM (or vmdock's first step) to the agent's hello.
const MetricToHello = "to agent hello"

// MetricGuestToHello is the guest's own share of it: its uptime when the
// agent answered (kernel, initramfs, systemd up to the agent unit).
const MetricGuestToHello = "guest kernel+init to agent hello"

// RawBoot is the boot section's baseline: it boots spec (the same devices,
// disks and shares) with the driver alone, with no host agent and no image
// or boot-disk step, and returns the time from starting the VM process to
// the guest agent's hello and the guest's uptime then; then it powers the
// guest off. Compared with `vmdock start`'s own steps up to the same hello,
// the difference is what vmdock adds.
func RawBoot(ctx context.Context, drv driver.Driver, spec driver.Spec) (time.Duration, float64, error) {
	plan, err := drv.Prepare(spec)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	m, err := drv.Start(ctx, plan)
	if err != nil {
		return 0, 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- m.Wait() }()
	stop := func() {
		select {
		case <-exited:
			return
		case <-time.After(time.Minute):
		}
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = m.Stop(sctx, true)
	}
	c, info, err := helloWhenUp(ctx, m, exited)
	took := time.Since(start)
	if err != nil {
		_ = m.Stop(context.Background(), true)
		return 0, 0, err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_ = c.PowerOff(pctx)
	cancel()
	c.Close()
	stop()
	return took, info.Uptime, nil
}

// helloWhenUp dials the agent channel until the guest agent completes the
// handshake and answers info, retrying quickly: the baseline is the best
// the machine can do.
func helloWhenUp(ctx context.Context, m driver.Machine, exited <-chan error) (*agent.Client, agent.Info, error) {
	c, info, err := agent.DialUntilUp(ctx, m.DialAgent, agent.RetryOptions{
		Delay: 100 * time.Millisecond,
		Check: func() error {
			select {
			case err := <-exited:
				return fmt.Errorf("the VM exited before its agent answered: %v", err)
			default:
				return nil
			}
		},
	})
	if err != nil {
		return nil, agent.Info{}, fmt.Errorf("raw boot: %w", err)
	}
	return c, info, nil
}
