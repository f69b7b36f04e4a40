package hostagent

import (
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/network/egress"
	"github.com/vmdock/vmdock/network/inject"
	"github.com/vmdock/vmdock/vm/config"
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

// secretProxy injects a sandbox's secrets; nil when it has none.
func (ha *hostAgent) secretProxy() (*inject.Proxy, error) {
	if !ha.cfg.IsSandbox() || len(ha.cfg.Sandbox.Secrets) == 0 {
		return nil, nil
	}
	secrets, err := ha.injectedSecrets()
	if err != nil {
		return nil, err
	}
	ca, err := ha.sandboxCA()
	if err != nil {
		return nil, err
	}
	p := inject.New(ca, secrets)
	p.Log = slog.Default().With("component", "sandbox-secrets")
	return p, nil
}

// injectedSecrets are the sandbox's secrets as the proxy sets them, their
// credentials read from the host now: the environment the host agent
// started in, or the keychain.
func (ha *hostAgent) injectedSecrets() ([]inject.Secret, error) {
	values, err := ha.cfg.ReadSecrets(config.HostSecrets)
	if err != nil {
		return nil, err
	}
	var secrets []inject.Secret
	for _, s := range ha.cfg.Sandbox.Secrets {
		secrets = append(secrets, inject.Secret{Host: s.Host, Header: s.HeaderName(), Value: s.HeaderValue(values[s.Name])})
	}
	return secrets, nil
}

// sandboxCA is the sandbox's CA, constrained to its secrets' hosts; nil
// without secrets.
func (ha *hostAgent) sandboxCA() (*inject.CA, error) {
	if !ha.cfg.IsSandbox() || len(ha.cfg.Sandbox.Secrets) == 0 {
		return nil, nil
	}
	var hosts []string
	for _, s := range ha.cfg.Sandbox.Secrets {
		if !slices.Contains(hosts, s.Host) {
			hosts = append(hosts, s.Host)
		}
	}
	cert, key := ha.inst.SandboxCAPaths()
	ca, err := inject.LoadOrCreateCA(cert, key, hosts)
	if err != nil {
		return nil, fmt.Errorf("sandbox CA: %w", err)
	}
	return ca, nil
}

// addSandboxCA has the guest trust the sandbox's CA (for its secrets'
// hosts only: the CA is name-constrained).
func (ha *hostAgent) addSandboxCA(s *agent.Setup) {
	ca, err := ha.sandboxCA()
	if err != nil {
		slog.Warn("the guest will not trust the sandbox CA", "err", err)
		return
	}
	if ca != nil {
		s.CACerts = append(s.CACerts, string(ca.PEM))
	}
}
