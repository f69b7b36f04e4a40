// Package instance runs an instance's lifecycle for the command line: start
// (spawn the host agent and follow its boot), stop, delete, exec, and the
// host-side steps that need the user's environment (docker context,
// loopback alias). Where files live is package store, what the instance
// should be is package config, and the host agent speaks package control.
//
// Three things are called Start: instance.Start spawns the host agent and
// follows its boot; hostagent.Run is that daemon; driver.Driver.Start,
// called by it, boots the machine.
package instance
