package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/bench"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/remote"
	"github.com/vmdock/vmdock/vm/store"
)

// remoteBenchEnv is what the remote section needs of a remote instance:
// its docker.sock, and its server as a user reaches it without vmdock
// (OpenSSH's own forwards through the same ssh command, the address ssh
// resolves). busybox is --busybox.
func remoteBenchEnv(cmd *cobra.Command, inst *store.Instance, cfg config.Config, busybox string) (bench.Env, bench.Machine, error) {
	ctx := cmd.Context()
	m := bench.HostMachine()
	target, err := remote.ParseURL(cfg.Remote.URL)
	if err != nil {
		return bench.Env{}, m, err
	}
	server := remote.Server{Target: target, Socket: cfg.Remote.Socket}
	host, err := server.HostName(ctx)
	if err != nil {
		return bench.Env{}, m, err
	}
	if busybox == "" {
		busybox = defaultBusybox
		if _, err := os.Stat(busybox); err != nil {
			busybox = ""
		}
	}
	env := bench.Env{DockerSocket: inst.DockerSocketPath(), Remote: &bench.RemoteEnv{
		Server: target.String(), Host: host, EngineSocket: cfg.Remote.Socket,
		Forward:       sshForward(server),
		ForwardSocket: filepath.Join(inst.Dir, "bench-ssh.sock"),
		Busybox:       busybox,
	}}
	m.Driver, m.Remote = "remote", target.String()
	st, err := instance.HostAgentState(ctx, inst)
	if err != nil {
		return env, m, fmt.Errorf("ask the host agent: %w", err)
	}
	env.HostAgentPID = st.PID
	if err := bench.DescribeServer(ctx, env.DockerSocket, &m); err != nil {
		return env, m, err
	}
	return env, m, nil
}

// defaultBusybox is where Debian's busybox-static puts its binary.
const defaultBusybox = "/bin/busybox"

// sshForward runs OpenSSH's own forward to server; stopping it removes
// the unix socket it made.
func sshForward(server remote.Server) func(local, remote string) (func() error, error) {
	return func(local, rem string) (func() error, error) {
		f, err := server.Forward(local, rem)
		if err != nil {
			return nil, err
		}
		return func() error {
			err := f.Close()
			if filepath.IsAbs(local) {
				_ = os.Remove(local)
			}
			return err
		}, nil
	}
}
