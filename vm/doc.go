// Package vm runs an instance's lifecycle for the command line: start
// (spawn the host agent and follow its boot), stop, delete, exec, and the
// host-side steps that need the user's environment (docker context,
// loopback alias). Where files live is package store, what the instance
// should be is package config, and the host agent speaks package control.
package vm
