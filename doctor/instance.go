package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/vmdock/vmdock/dockerhost/dockerctx"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/instance"
)

func usesContainerd(f Facts) bool { return f.Config.Runtime == config.RuntimeContainerd }

// checkDockerCLI: vmdock runs the engine; the client is the user's.
func checkDockerCLI(ctx context.Context, f Facts) Result {
	if usesContainerd(f) {
		return ok("not needed: this instance runs containerd (`vmdock nerdctl`)")
	}
	path, err := f.LookPath("docker")
	if err != nil {
		fix := "install the docker CLI: Docker's apt/dnf repository (docker-ce-cli) or your distribution's package"
		if f.Host.OS == osDarwin {
			fix = "`brew install docker` (the CLI only; vmdock is the engine)"
		}
		return warn(fix, "no docker CLI on PATH: vmdock runs the engine, but you need the client to talk to it")
	}
	out, err := f.Run(ctx, path, "--version")
	if err != nil {
		return warn("reinstall the docker CLI", "%s --version: %v %s", path, err, firstLine(out))
	}
	return ok("%s (%s)", firstLine(out), path)
}

// checkDockerContext: the docker CLI talks to whatever DOCKER_HOST,
// DOCKER_CONTEXT or the current context say, which may not be vmdock.
func checkDockerContext(ctx context.Context, f Facts) Result {
	if usesContainerd(f) {
		return ok("not used: this instance runs containerd (`vmdock nerdctl`)")
	}
	ours := dockerctx.Name(f.Instance.Name)
	if h := f.Getenv("DOCKER_HOST"); h != "" {
		if h == "unix://"+f.Instance.DockerSocketPath() {
			return ok("DOCKER_HOST is this instance's socket")
		}
		return warn("`unset DOCKER_HOST` (it outranks every docker context)", "DOCKER_HOST=%s: the docker CLI talks to that, not to %s", h, ours)
	}
	if c := f.Getenv("DOCKER_CONTEXT"); c != "" && c != ours {
		return warn("`unset DOCKER_CONTEXT`", "DOCKER_CONTEXT=%s: the docker CLI uses that, not %s", c, ours)
	}
	current := f.DockerContext()
	if current == ours {
		return ok("%s (this instance's)", current)
	}
	created, st := f.InstanceStatus(ctx)
	switch {
	case created && st.State == instance.StateRunning:
		return warn(fmt.Sprintf("`docker context use %s`", ours), "%s: docker talks to another engine while %s runs", current, f.Instance.Name)
	case !f.Config.Activate:
		return ok("%s; this instance does not switch it (activate: false): `docker context use %s`", current, ours)
	}
	return ok("%s; `vmdock start` switches it to %s", current, ours)
}

// checkInstance reports the profile's state; only a broken one fails.
func checkInstance(ctx context.Context, f Facts) Result {
	name := f.Instance.Name
	created, st := f.InstanceStatus(ctx)
	switch {
	case !created:
		return ok("profile %s not created yet; `vmdock start -p %s` creates it%s", name, name, networkNote(f, st))
	case st.State == instance.StateBroken:
		return fail(fmt.Sprintf("`vmdock logs hostagent -p %s` says more; `vmdock stop -p %s`, then `vmdock start -p %s`", name, name, name),
			"profile %s: %s", name, oneLine(st.String()))
	case st.PID != 0:
		return ok("profile %s: %s (host agent pid %d)%s", name, st.String(), st.PID, networkNote(f, st))
	}
	return ok("profile %s: %s%s", name, strings.TrimSpace(st.String()), networkNote(f, st))
}

// networkNote names the network the instance runs on, or the one its next
// start runs on when it is not running.
func networkNote(f Facts, st instance.LiveStatus) string {
	if h := st.HostAgent; h != nil && h.Network != nil {
		return fmt.Sprintf("; network %s (%s)", h.Network.Stack, h.Network.Mode)
	}
	return fmt.Sprintf("; its next start's network: %s (%s)", f.Config.Network.Stack, f.Config.Network.Mode)
}

// checkNetworkPaths fails when the host agent's watchdog finds a network
// path broken that it could not mend, and says what it last mended.
func checkNetworkPaths(ctx context.Context, f Facts) Result {
	name := f.Instance.Name
	created, st := f.InstanceStatus(ctx)
	h := st.HostAgent
	if !created || st.State != instance.StateRunning || h == nil || h.Watchdog == nil {
		return ok("profile %s is not running: nothing to check", name)
	}
	var broken, healthy []string
	for _, p := range h.Watchdog.Paths {
		if p.OK {
			healthy = append(healthy, p.Path)
		} else {
			broken = append(broken, p.Path+": "+oneLine(p.Problem))
		}
	}
	if len(broken) > 0 {
		return fail(fmt.Sprintf("`vmdock logs hostagent -p %s` shows what broke and what the watchdog tried; `vmdock restart -p %s` if it stays broken", name, name),
			"profile %s: network paths broken: %s", name, strings.Join(broken, "; "))
	}
	msg := fmt.Sprintf("profile %s: network paths healthy (%s)", name, strings.Join(healthy, ", "))
	if r := h.Watchdog.LastRepair; r != nil {
		msg += fmt.Sprintf("; last repair %s %s: %s", r.At, r.Path, oneLine(r.What))
	}
	return ok("%s", msg)
}

// checkGuestDNS fails when the running guest has no resolver to forward
// to: every pull, build and API call by name then fails in its containers.
func checkGuestDNS(ctx context.Context, f Facts) Result {
	name := f.Instance.Name
	created, st := f.InstanceStatus(ctx)
	h := st.HostAgent
	if !created || st.State != instance.StateRunning || h == nil || h.GuestDNS == nil {
		return ok("profile %s is not running: nothing to check", name)
	}
	d := h.GuestDNS
	switch {
	case d.Error != "":
		return warn(fmt.Sprintf("`vmdock logs guest -p %s` says more", name), "the guest agent did not say where its DNS goes: %s", oneLine(d.Error))
	case len(d.Upstreams) == 0:
		return fail(fmt.Sprintf("set `network.dns` in the profile's vmdock.yaml (e.g. [10.0.2.3]) or `vmdock restart -p %s`; `vmdock logs guest -p %s` shows the DNS server's upstreams", name, name),
			"profile %s: the guest's DNS has no upstream: no name outside vmdock resolves in the guest or its containers", name)
	}
	return ok("profile %s: the guest resolves through %s", name, strings.Join(d.Upstreams, ", "))
}
