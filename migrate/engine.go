// Package migrate brings images, volumes and containers from another
// Docker engine (Docker Desktop, Colima, any engine on a unix socket) into
// a vmdock instance's engine, through nothing but the two engines' APIs:
// images stream from one's export to the other's load, volume contents
// travel as tar through never-started helper containers, and containers
// are created again, stopped, from their inspected configuration.
package migrate

import (
	"github.com/vmdock/vmdock/dockerhost/engineapi"
)

// Engine is a Docker Engine API client on a unix socket.
type Engine struct {
	*engineapi.Client
}

// NewEngine is a client for the engine listening on socket.
func NewEngine(socket string) *Engine {
	return &Engine{engineapi.Unix(socket)}
}

// apiError is an engine's answer with a status of 400 or more.
type apiError = engineapi.Error

func isNotFound(err error) bool { return engineapi.IsNotFound(err) }
func isConflict(err error) bool { return engineapi.IsConflict(err) }
