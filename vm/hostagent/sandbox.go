package hostagent

import (
	"fmt"
	"os"

	"github.com/vmdock/vmdock/network/egress"
)

// egressPolicy is a sandbox's allowlist for the network stack, its
// refusals appended to the instance's egress log; nil for any other
// instance.
func (ha *hostAgent) egressPolicy() (*egress.Policy, error) {
	if !ha.cfg.IsSandbox() {
		return nil, nil
	}
	p, err := ha.cfg.EgressPolicy(appendLog(ha.inst.EgressLogPath()))
	if err != nil {
		return nil, fmt.Errorf("sandbox egress: %w", err)
	}
	return p, nil
}

// guestHostAccessIP is the address the guest reaches the host's loopback
// on: none in a sandbox, whose only way to the host is its workspace.
func (ha *hostAgent) guestHostAccessIP() string {
	if ha.cfg.IsSandbox() {
		return ""
	}
	return ha.cfg.Network.HostAccessIP
}

// appendLog writes each line to the end of the file, opened for that
// line: the policy writes rarely (a repeated refusal once per interval),
// and no handle outlives a stack.
type appendLog string

func (l appendLog) Write(p []byte) (int, error) {
	f, err := os.OpenFile(string(l), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := f.Write(p)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}
