// Package control is the host agent's HTTP API on the instance's control
// socket (ha.sock): the routes, the types they carry, the server the host
// agent runs and the client every CLI command uses, kept together so the
// two sides cannot drift apart.
//
//	GET  /v1/status  -> Status (with the boot report once ready)
//	GET  /v1/events  -> NDJSON Event stream, from the first event on
//	POST /v1/stop    -> 202; ?force=1 skips the graceful power-off
//	POST /v1/exec    -> 101; the connection becomes a raw guest agent stream
//	POST /v1/sync/flush?path=P -> 200 once the sync mount at host path P
//	                  (every sync mount without P) completed a full cycle
//	POST /v1/sync/reset?path=P -> 200; P's sync history is forgotten
//	POST /v1/sync/pause, /v1/sync/resume -> 200; every sync mount
//	POST /v1/idle?after=D -> 200; the running VM pauses after D unused
//	                  (Go duration text, 0: never)
package control

import (
	"time"

	"github.com/vmdock/vmdock/network/forward"
	"github.com/vmdock/vmdock/vm/driver"
)

// StopRequest is how `vmdock stop` wants the instance down.
type StopRequest struct {
	Force  bool // kill the VM without a graceful power-off (never saves)
	NoSave bool // power the guest off even when the instance saves on stop
}

// Routes of the API.
const (
	StatusPath = "/v1/status"
	EventsPath = "/v1/events"
	StopPath   = "/v1/stop"
	// ExecPath upgrades the connection to a raw agent stream: the host
	// agent owns the only channel to the guest, so `vmdock ssh` runs its
	// exec through it.
	ExecPath = "/v1/exec"
	// SyncFlushPath and SyncResetPath act on sync mounts (vmdock sync).
	SyncFlushPath  = "/v1/sync/flush"
	SyncResetPath  = "/v1/sync/reset"
	SyncPausePath  = "/v1/sync/pause"
	SyncResumePath = "/v1/sync/resume"
	// IdlePath sets the running VM's idle period (`vmdock set idle`).
	IdlePath = "/v1/idle"

	// HeapProfilePath serves the host agent's heap profile (pprof's
	// format), so its memory can be read on a user's machine without a
	// debug build.
	HeapProfilePath = "/v1/debug/heap"
	// CPUProfilePath serves a CPU profile of the host agent taken over
	// ?seconds=N (1-60, default 10), pprof's format: where its time goes
	// while, say, a published port streams.
	CPUProfilePath = "/v1/debug/cpu"
)

// ExecUpgrade is the Upgrade header value of an exec request.
const ExecUpgrade = "vmdock-agent-stream"

// Phases of a live host agent (Status.Phase).
const (
	PhaseStarting     = "starting"
	PhaseRunning      = "running"
	PhaseReconnecting = "reconnecting" // to the guest agent
	PhaseStopping     = "stopping"
)

// Status is what a live host agent reports about its instance.
type Status struct {
	PID     int                `json:"pid"`
	Phase   string             `json:"phase"`
	Step    string             `json:"step,omitempty"`
	Machine driver.MachineInfo `json:"machine"`
	// Network is what carries the VM's network in this boot: its stack
	// (slirp, vznat, gvisor) and mode; nil before the vm step.
	Network *NetworkStatus  `json:"network,omitempty"`
	Ports   []ForwardedPort `json:"ports"`
	// Runtime is the container runtime the guest runs (docker, containerd);
	// its socket is RuntimeSocket.
	Runtime       string   `json:"runtime"`
	RuntimeSocket string   `json:"runtimeSocket"`
	Errors        []string `json:"errors,omitempty"`
	// Boot is how the boot went; nil until the instance is ready.
	Boot *BootReport `json:"boot,omitempty"`
	// Syncs are the sync mounts, once the sync engine runs.
	Syncs []SyncStatus `json:"syncs,omitempty"`
	// Shares say, per share, what the host agent watches for host edits
	// to raise as inotify events in the guest; set once the shares are
	// mounted.
	Shares []ShareWatch `json:"shares,omitempty"`
	// Cost is what the instance costs the host; set while the VM runs.
	Cost *HostCost `json:"cost,omitempty"`
	// Proxy is the proxy the guest's daemons use, credentials masked; nil:
	// none. CACerts counts the CA certificates the guest trusts beyond its
	// stock roots. Both are set once the boot read them from the host.
	Proxy   *ProxyStatus `json:"proxy,omitempty"`
	CACerts int          `json:"caCerts,omitempty"`
	// SSHAgent is the host's SSH agent as the guest is offered it.
	SSHAgent *SSHAgentStatus `json:"sshAgent,omitempty"`
	// Idle is the idle pause: its period, and whether the VM is paused.
	Idle *IdleStatus `json:"idle,omitempty"`
	// AgentSessions counts the guest agent sessions since the host agent
	// started: 1 until a reconnect.
	AgentSessions int `json:"agentSessions,omitempty"`
	// GuestDNS is where the guest's lookups of outside names go; nil while
	// no guest agent session runs or the VM is paused.
	GuestDNS *GuestDNSStatus `json:"guestDns,omitempty"`
	// Watchdog is each network path's health as the host agent's watchdog
	// last checked it, and its last repair; nil until the instance is up.
	Watchdog *WatchdogStatus `json:"watchdog,omitempty"`
}

// WatchdogStatus is the host agent's watchdog over the VM's network paths.
type WatchdogStatus struct {
	// Paths in a fixed order: ports (the published ports' host
	// listeners), agent (the guest agent session the tunnels and host
	// access use), relay (the stack's dials to the host), dns (the
	// stack's DNS server); relay and dns with the gvisor stack only.
	Paths []PathHealth `json:"paths"`
	// LastRepair is the last thing the watchdog mended; nil: none yet.
	LastRepair *WatchdogRepair `json:"lastRepair,omitempty"`
	// Checked is when the paths were last looked at (RFC 3339).
	Checked string `json:"checked,omitempty"`
}

// PathHealth is one network path's health.
type PathHealth struct {
	Path string `json:"path"`
	OK   bool   `json:"ok"`
	// Problem says what is wrong when not OK.
	Problem string `json:"problem,omitempty"`
}

// WatchdogRepair is one repair: when, on which path, and what was done.
type WatchdogRepair struct {
	At   string `json:"at"` // RFC 3339
	Path string `json:"path"`
	What string `json:"what"`
}

// GuestDNSStatus is the guest's DNS forwarder as its agent reports it.
type GuestDNSStatus struct {
	// Upstreams are the resolvers it forwards to (ip:port); empty: no
	// outside name resolves in the guest or its containers.
	Upstreams []string `json:"upstreams"`
	// Error says why the guest could not be asked.
	Error string `json:"error,omitempty"`
}

// NetworkStatus is the network a running VM is on.
type NetworkStatus struct {
	Stack string `json:"stack"` // slirp, vznat or gvisor
	Mode  string `json:"mode"`  // user or isolated
	// Relays is what the guest holds on the host through the host agent's
	// stack (gvisor only), against its caps.
	Relays *NetRelays `json:"relays,omitempty"`
}

// NetRelays counts the guest's relays through the user-mode stack now,
// its caps, and what the caps and the frame check turned away since the
// stack started.
type NetRelays struct {
	UDPFlows     int `json:"udpFlows"`
	TCP          int `json:"tcp"`
	DNSInFlight  int `json:"dnsInFlight"`
	PendingDials int `json:"pendingDials"`
	// Caps: udpFlows, tcp, dnsInFlight, pendingDialsPerDest.
	Caps    map[string]int `json:"caps"`
	Dropped NetDropped     `json:"dropped"`
}

// NetDropped is what the stack turned away, by reason.
type NetDropped struct {
	UDPEvicted      int64 `json:"udpEvicted"`      // flows ended for new ones past the cap
	TCPRefused      int64 `json:"tcpRefused"`      // connections reset past the cap
	DNSDropped      int64 `json:"dnsDropped"`      // queries dropped past the cap
	DialsDeferred   int64 `json:"dialsDeferred"`   // SYNs dropped for their destination's pending dials
	MalformedFrames int64 `json:"malformedFrames"` // frames too short or too long for Ethernet
	Panics          int64 `json:"panics"`          // panics recovered in the stack
}

// IdleStatus is the idle pause as the host agent runs it.
type IdleStatus struct {
	// After is the idle period in Go's duration text; "0": never.
	After string `json:"after"`
	// Off says why the VM never pauses although After is set (a driver
	// that cannot pause).
	Off    string `json:"off,omitempty"`
	Paused bool   `json:"paused"`
	// PausedSince is when the current pause began (RFC 3339).
	PausedSince *time.Time `json:"pausedSince,omitempty"`
	Pauses      int        `json:"pauses"`
	// LastWakeMs is how long the last wake took, in milliseconds.
	LastWakeMs *float64 `json:"lastWakeMs,omitempty"`
	// Users counts the uses open now (connections, sessions).
	Users int `json:"users"`
}

// SSHAgentStatus says whether containers reach the host's SSH agent at
// GuestSocket, and which host socket that is (SSH_AUTH_SOCK at start).
type SSHAgentStatus struct {
	On          bool   `json:"on"`
	HostSocket  string `json:"hostSocket,omitempty"`
	GuestSocket string `json:"guestSocket,omitempty"`
	// Off says why it is off.
	Off string `json:"off,omitempty"`
}

// ProxyStatus is the proxy a start applied: Source says where it came
// from (config, environment, system); PAC is the auto-config URL of the
// host's system settings, which is reported, not applied.
type ProxyStatus struct {
	HTTP    string `json:"http,omitempty"`
	HTTPS   string `json:"https,omitempty"`
	NoProxy string `json:"noProxy,omitempty"`
	Source  string `json:"source,omitempty"`
	PAC     string `json:"pac,omitempty"`
}

// HostCost is the VM's use of the host: the VM process's memory and CPU,
// and the disk files' space.
type HostCost struct {
	// VMResidentBytes is the VM process's resident memory, and
	// GuestRAMResidentBytes the part of it that is the guest's RAM block
	// (QEMU; absent when that block was not found).
	VMResidentBytes       int64 `json:"vmResidentBytes,omitempty"`
	GuestRAMResidentBytes int64 `json:"guestRamResidentBytes,omitempty"`
	// CPUPercent is the VM process's CPU use over the last
	// CPUWindowSeconds (a minute once the instance has run that long), in
	// percent of one core; absent until the second sample, 10 s after
	// the instance is ready.
	CPUPercent       *float64 `json:"cpuPercent,omitempty"`
	CPUWindowSeconds float64  `json:"cpuWindowSeconds,omitempty"`
	// Unmeasured says why memory or CPU figures are absent.
	Unmeasured string     `json:"unmeasured,omitempty"`
	Disks      []DiskCost `json:"disks"`
}

// DiskCost is one disk file: the size the guest sees, and the space it
// takes on the host (less while it has holes).
type DiskCost struct {
	Name           string `json:"name"` // root, data
	Path           string `json:"path"`
	SizeBytes      int64  `json:"sizeBytes"`
	AllocatedBytes int64  `json:"allocatedBytes"`
	// Error says why figures are missing (0): the file could not be read,
	// or its space is not known on this OS.
	Error string `json:"error,omitempty"`
}

// ShareWatch is what the host agent watches of one share.
type ShareWatch struct {
	HostPath  string `json:"hostPath"`
	GuestPath string `json:"guestPath"`
	// Watch is how host edits are seen (inotify, fsevents), or "off".
	Watch string `json:"watch"`
	// Off says why Watch is off.
	Off string `json:"off,omitempty"`
	// LeftOut are the folders inside the share the watch skips: the
	// share's excludes, and by default vmdock's own folders and the OS's
	// busy ones, whose every change would come back as a guest touch.
	LeftOut []LeftOutFolder `json:"leftOut,omitempty"`
	// Capped: the folder watch limit was reached, and part of the share
	// is not watched.
	Capped bool `json:"capped,omitempty"`
}

// LeftOutFolder is a folder a share's watch skips, and why.
type LeftOutFolder struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// SyncStatus is one sync mount: its engine's state and what needs a
// person's attention (conflicts, problems).
type SyncStatus struct {
	ID        string `json:"id"`
	HostPath  string `json:"hostPath"`
	GuestPath string `json:"guestPath"` // where containers see it
	// State is the engine's, e.g. watching, scanning, connecting-guest,
	// staging-host, halted-on-root-emptied, paused.
	State     string    `json:"state"`
	Connected bool      `json:"connected"`
	LastError string    `json:"lastError,omitempty"`
	LastSync  time.Time `json:"lastSync,omitzero"`
	LastFlush time.Time `json:"lastFlush,omitzero"`
	// Cycles counts the engine's completed sync cycles since the session
	// (re)connected: each one scanned both sides.
	Cycles     uint64         `json:"cycles"`
	HostFiles  uint64         `json:"hostFiles"`
	GuestFiles uint64         `json:"guestFiles"`
	Conflicts  []SyncConflict `json:"conflicts,omitempty"`
	// MoreConflicts counts conflicts beyond the listed ones.
	MoreConflicts uint64   `json:"moreConflicts,omitempty"`
	Problems      []string `json:"problems,omitempty"`
}

// SyncConflict is a path both sides changed since the last sync. Each
// side keeps its own content until one is changed to match the other.
type SyncConflict struct {
	Path  string `json:"path"`
	Host  string `json:"host"`  // what the host did: created, modified, deleted
	Guest string `json:"guest"` // what the guest did
}

// ForwardedPort is one guest listener and what the host did about it.
type ForwardedPort = forward.ForwardedPort

// BootReport is what the last boot took, step by step, for `vmdock bench`
// and for anyone asking why a start was slow.
type BootReport struct {
	Steps []StepTime `json:"steps"`
	// GuestUptime is the guest's uptime (s) when its agent first answered:
	// kernel plus init time, as the guest saw it.
	GuestUptime float64 `json:"guestUptime,omitempty"`
	GuestKernel string  `json:"guestKernel,omitempty"`
}

// StepTime is one boot step's duration.
type StepTime struct {
	Step    string  `json:"step"`
	Seconds float64 `json:"seconds"`
}

// Event is one line of the host agent's progress stream.
type Event struct {
	Time    string  `json:"time"`
	Step    string  `json:"step"`
	State   string  `json:"state"`
	Error   string  `json:"error,omitempty"`
	Detail  string  `json:"detail,omitempty"`
	Seconds float64 `json:"seconds,omitempty"` // a done step's duration
}

// Event states.
const (
	EventBegin   = "begin"
	EventDone    = "done"
	EventFailed  = "failed"
	EventNote    = "note"
	EventReady   = "ready"
	EventStopped = "stopped"
)

// How the guest went down: the detail of the host agent's "stop" event.
const (
	StopByAgent    = "agent"   // the guest agent ran the power-off
	StopByACPI     = "acpi"    // the guest obeyed the ACPI power button
	StopByForce    = "forced"  // the VM was killed
	StopBySelf     = "guest"   // the guest powered itself off
	StopDuringBoot = "boot"    // the stop came during the boot, which was undone
	StopBySave     = "saved"   // the VM was saved for the next start to resume
	StopBySettle   = "settled" // the guest stopped its runtimes and synced, then the VM was ended
	StopRemote     = "remote"  // a remote instance's ssh session closed; the server's containers run on
)
