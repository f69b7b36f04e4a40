package doctor

import (
	"context"
	"time"

	"github.com/vmdock/vmdock/agent/agentbin"
	"github.com/vmdock/vmdock/vm/remote"
)

// remoteTimeout bounds the ssh probe: a server that does not answer must
// not hang the report.
const remoteTimeout = 30 * time.Second

const remoteDocs = "see docs/remote.md"

// checkRemote reaches a remote instance's server the way a start does:
// ssh in BatchMode, Docker's socket usable by the SSH user, an arch this
// build carries the helper for.
func checkRemote(ctx context.Context, f Facts) Result {
	r := f.Config.Remote
	if r == nil {
		return ok("not a remote instance")
	}
	target, err := remote.ParseURL(r.URL)
	if err != nil {
		return fail("correct remote.url in the config", "remote.url: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	s := remote.Server{Target: target, Socket: r.Socket}
	facts, err := f.ProbeRemote(s, ctx)
	if err != nil {
		return fail(remoteDocs, "%v", err)
	}
	if _, err := agentbin.Binary(facts.Arch); err != nil {
		return fail("install a vmdock build that carries the linux/"+facts.Arch+" agent", "%v", err)
	}
	return ok("%s: ssh answers, %s is usable, a linux/%s server (the helper is installed in ~/.cache/vmdock at start)", target, r.Socket, facts.Arch)
}
