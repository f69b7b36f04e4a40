package vm

import "github.com/vmdock/vmdock/vm/driver"

// The host agent serves HTTP on the instance's control socket (ha.sock):
//
//	GET  /v1/status  -> HostAgentStatus
//	GET  /v1/events  -> NDJSON Event stream, from the first event on
//	POST /v1/stop    -> 202; ?force=1 skips the graceful power-off
const (
	ControlStatusPath = "/v1/status"
	ControlEventsPath = "/v1/events"
	ControlStopPath   = "/v1/stop"
)

// HostAgentStatus is what a live host agent reports about its instance.
type HostAgentStatus struct {
	PID     int                `json:"pid"`
	Phase   string             `json:"phase"` // starting, running, reconnecting (to the guest agent), stopping
	Step    string             `json:"step,omitempty"`
	Machine driver.MachineInfo `json:"machine"`
	Ports   []ForwardedPort    `json:"ports"`
	Docker  string             `json:"dockerSocket"`
	Errors  []string           `json:"errors,omitempty"`
}

// ForwardedPort is one guest listener and what the host did about it.
type ForwardedPort struct {
	Proto     string `json:"proto"`
	GuestPort int    `json:"guestPort"`
	HostAddr  string `json:"hostAddr"`
	Error     string `json:"error,omitempty"` // e.g. "address already in use"
}

// Event is one line of the host agent's progress stream.
type Event struct {
	Time   string `json:"time"`
	Step   string `json:"step"`
	State  string `json:"state"` // begin, done, failed, ready, stopped
	Error  string `json:"error,omitempty"`
	Detail string `json:"detail,omitempty"`
}
