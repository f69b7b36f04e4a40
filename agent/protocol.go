// Package agent is the host-guest protocol: one hashicorp/yamux session over
// the agent channel (vsock or virtio-serial). Every stream starts with one
// JSON Request line; the peer answers with one JSON Response line, then the
// stream carries what the op says (raw bytes for dial, NDJSON for watches).
package agent

// Handshake: the host writes HelloLine+" "+nonce+"\n"; the guest discards
// anything before it (virtio-serial keeps stale bytes across host
// reconnects), echoes the same line back, then both sides start yamux with
// the host as yamux client.
const HelloLine = "VMDOCK-HELLO"

// Names the host and the guest must agree on outside the stream protocol.
const (
	// RosettaTag is the virtiofs tag of the vz Rosetta share; the guest
	// mounts it and registers the binfmt handler for amd64 binaries.
	RosettaTag = "vmdock-rosetta"
	// HostSocketName is the host end of the virtio-serial agent channel in
	// the instance folder: QEMU listens on it, the host agent dials it.
	HostSocketName = "agent.sock"
	// GuestDockerSocket is where dockerd listens in the guest; the host's
	// docker socket is tunnelled to it.
	GuestDockerSocket = "/var/run/docker.sock"
	// GuestContainerdSocket is containerd's socket in the guest, tunnelled
	// to the host's containerd.sock under the containerd runtime.
	GuestContainerdSocket = "/run/containerd/containerd.sock"
	// GuestSSHAgentSocket is where the guest offers the host's SSH agent:
	// Docker Desktop's path, so its documented docker run lines work.
	GuestSSHAgentSocket = "/run/host-services/ssh-auth.sock"
)

// Ops a stream can ask for. Host-to-guest unless noted.
const (
	OpInfo       = "info"        // -> Info
	OpSetup      = "setup"       // Setup -> system prepared (hostname, dns, time, disks)
	OpMount      = "mount"       // MountRequest
	OpDocker     = "docker"      // start dockerd, wait until the socket answers
	OpContainerd = "containerd"  // start containerd (+ BuildKit), wait until it answers
	OpDial       = "dial"        // then raw bytes to Network/Address in the guest
	OpExec       = "exec"        // ExecRequest, then pty/stdio bytes, then ExecExit
	OpWatchPorts = "watch-ports" // NDJSON PortEvent stream
	OpSetTime    = "set-time"    // UnixNano
	OpPowerOff   = "poweroff"
	OpHostDial   = "host-dial"   // guest-to-host: dial 127.0.0.1:Port on the host
	OpSSHAgent   = "ssh-agent"   // guest-to-host: then raw bytes to the host's SSH agent
	OpSync       = "sync"        // then the sync engine's endpoint protocol (mounts/syncmount)
	OpSyncWatch  = "sync-watch"  // SyncWatch -> NDJSON SyncChange stream
	OpTouch      = "touch"       // Touch: guest paths whose host side changed
	OpIdleCheck  = "idle-check"  // -> IdleReport: what keeps the guest busy
	OpQuiesce    = "quiesce"     // give memory and disk back, stop pinging: the VM pauses next
	OpSettle     = "settle"      // stop the container runtimes, flush the disks: the host ends the VM next
	OpFlushDisks = "flush-disks" // put every written block on the disks: a forced stop ends the VM next
)

// Request is the first line of every stream.
type Request struct {
	Op string `json:"op"`

	// dial, host-dial
	Network string `json:"network,omitempty"` // tcp, udp, unix
	Address string `json:"address,omitempty"`
	Port    int    `json:"port,omitempty"`

	Setup     *Setup     `json:"setup,omitempty"`
	SyncWatch *SyncWatch `json:"syncWatch,omitempty"`
	// Touch lists guest paths in shares whose host side changed: the guest
	// sets each one's times to what they are, so its kernel raises the
	// inotify event that virtiofs and 9p do not.
	Touch []string       `json:"touch,omitempty"`
	Mount *MountRequest  `json:"mount,omitempty"`
	Exec  *ExecRequest   `json:"exec,omitempty"`
	Time  int64          `json:"time,omitempty"` // unix nanoseconds
	Extra map[string]any `json:"extra,omitempty"`
}

// Response is the first line the peer sends back.
type Response struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	Info  *Info  `json:"info,omitempty"`
	// Idle answers OpIdleCheck.
	Idle *IdleReport `json:"idle,omitempty"`
}

// IdleReport is what the guest knows of its own use, for the host agent's
// idle pause: the host sees every connection, the guest sees containers.
type IdleReport struct {
	// RunningContainers counts container processes (the first child of
	// each containerd shim), whichever runtime started them.
	RunningContainers int `json:"runningContainers"`
}

// Info answers OpInfo.
type Info struct {
	Version  string  `json:"version"`
	Arch     string  `json:"arch"`
	Kernel   string  `json:"kernel"`
	Uptime   float64 `json:"uptimeSeconds"`
	Hostname string  `json:"hostname"`
	// Addrs are the IPv4 addresses of the interface holding the guest's
	// default route (none in an isolated VM, or before DHCP): where a host
	// that routes to the VM network reaches the guest's ports.
	Addrs []string `json:"addrs,omitempty"`
	// DNSUpstreams are the resolvers the guest's DNS forwarder sends what
	// it does not answer itself to (ip:port), the guest's own resolvers
	// when no forwarder runs; empty: no name outside the guest resolves.
	DNSUpstreams []string `json:"dnsUpstreams"`
}

// Setup prepares the guest system once per boot, before mounts and dockerd.
type Setup struct {
	Hostname   string            `json:"hostname"`
	DNS        []string          `json:"dns,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	TimeUnixNs int64             `json:"timeUnixNs"`
	GrowRoot   bool              `json:"growRoot"`
	// DataDisk is the guest device for /var/lib/docker and
	// /var/lib/containerd (its by-id link); formatted ext4 on first boot.
	DataDisk string `json:"dataDisk,omitempty"`
	// DataDiskFallback is the same disk's name by attach order, for a
	// guest where DataDisk's link and serial are not found.
	DataDiskFallback string `json:"dataDiskFallback,omitempty"`
	Binfmt           bool   `json:"binfmt"`
	Rosetta          bool   `json:"rosetta"`
	// HostAccessIP is redirected to the agent, which tunnels to the host's
	// loopback (10.254.254.254 and host.docker.internal).
	HostAccessIP string `json:"hostAccessIP,omitempty"`
	// CACerts are the CA certificates (PEM, one each) the guest trusts
	// beyond its stock roots, the whole set every time: the guest rebuilds
	// its trust store only when the set differs from the one it installed.
	CACerts []string `json:"caCerts,omitempty"`
	// Proxy is the HTTP proxy of the guest's daemons and package tools;
	// nil: none.
	Proxy *Proxy `json:"proxy,omitempty"`
	// SSHAgent offers the host's SSH agent at GuestSSHAgentSocket; false
	// removes it (a resumed guest may still have it from its last run).
	SSHAgent bool `json:"sshAgent,omitempty"`
}

// Proxy is Setup's proxy, in the conventional variables' syntax.
type Proxy struct {
	HTTP    string `json:"http,omitempty"`
	HTTPS   string `json:"https,omitempty"`
	NoProxy string `json:"noProxy,omitempty"`
}

// MountRequest mounts one share at Target, its guest path.
type MountRequest struct {
	Type     string `json:"type"` // virtiofs, 9p
	Tag      string `json:"tag"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly"`
	// Exclude are subfolders of Target (clean, relative) that the guest
	// bind-mounts from its data disk over the share; HostPath names the
	// share in that storage, so each mount keeps its own across boots.
	Exclude  []string `json:"exclude,omitempty"`
	HostPath string   `json:"hostPath,omitempty"`
	// UID and GID own a sync mount's guest copy (Type MountTypeSync, Tag
	// its id): the host user's, so files containers write come back to
	// the host as theirs.
	UID int `json:"uid,omitempty"`
	GID int `json:"gid,omitempty"`
	// Cache is the 9p client's cache= mode (mmap when empty).
	Cache string `json:"cache,omitempty"`
}

// SyncWatch asks the guest to watch the copies of these sync mounts and
// report each change, so the host syncs at once instead of at the next
// poll.
type SyncWatch struct {
	Mounts []SyncWatchMount `json:"mounts"`
}

// SyncWatchMount is one sync mount's copy (GuestSyncDir/ID; on a remote
// server, the folder its mount request claimed) and the subfolders the
// engine does not sync (left unwatched).
type SyncWatchMount struct {
	ID      string   `json:"id"`
	Exclude []string `json:"exclude,omitempty"`
}

// SyncChange is one line of the sync-watch stream: something changed in
// the copy of sync mount ID (coalesced over bursts).
type SyncChange struct {
	ID string `json:"id"`
}

// MountTypeSync is the MountRequest type of a sync mount: the guest binds
// its copy on the data disk at Target; a remote server's helper makes or
// claims the folder at Target itself as the copy.
const MountTypeSync = "sync"

// GuestSyncDir holds the guest copies of sync mounts (GuestSyncDir/<id>)
// and the sync engine's state, on the guest's data disk.
const GuestSyncDir = "/var/lib/vmdock-data/sync"

// ExecRequest runs a command in the guest; with TTY the stream carries a pty.
type ExecRequest struct {
	Argv []string `json:"argv"`
	// Dir is the working folder in the guest; "" is the agent's own (/).
	Dir  string            `json:"dir,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	TTY  bool              `json:"tty"`
	Rows int               `json:"rows,omitempty"`
	Cols int               `json:"cols,omitempty"`
}

// PortEvent is one change in the guest's listening sockets.
type PortEvent struct {
	Added bool   `json:"added"`
	Proto string `json:"proto"` // tcp, udp
	IP    string `json:"ip"`    // as bound in the guest: 0.0.0.0, ::, 127.0.0.1
	Port  int    `json:"port"`
	// Synced marks the end of the full listing a watch starts with: ports
	// the host forwards that it did not name are gone (the watch is new
	// after a reconnect). It carries no port.
	Synced bool `json:"synced,omitempty"`
}

// Framing, in addition to the Request/Response lines above:
//
//   - Handshake lines and Request/Response lines are single JSON (or hello)
//     lines ending in '\n'. Readers take them byte by byte so nothing after
//     the newline is consumed: the raw payload follows directly.
//   - dial/host-dial with tcp or unix, and ssh-agent: after an OK Response
//     the stream is the raw byte stream; closing the stream (yamux FIN) is
//     the half-close.
//   - dial with udp: each datagram is a 2-byte big-endian length followed by
//     that many bytes (package lenprefix; DatagramConn on the guest,
//     network.PacketStream on the host).
//   - watch-ports: one JSON PortEvent per line, the first batch being the
//     full current set as Added events, followed by {"synced":true}.
//   - exec: frames of [1 byte kind][4 byte big-endian length][payload] in
//     both directions, kinds below. The guest ends with FrameExit whose
//     payload is a JSON ExecExit, then closes the stream.
const (
	FrameStdin    byte = 1 // host -> guest: bytes for the process's stdin
	FrameStdout   byte = 2 // guest -> host (the pty's output when TTY)
	FrameStderr   byte = 3 // guest -> host, only without TTY
	FrameResize   byte = 4 // host -> guest: rows, cols as two big-endian uint16
	FrameStdinEOF byte = 5 // host -> guest: stdin is done (pty: sends ^D)
	FrameExit     byte = 6 // guest -> host: JSON ExecExit, last frame
)

// ExecExit is the payload of FrameExit.
type ExecExit struct {
	Code  int    `json:"code"`
	Error string `json:"error,omitempty"` // the process could not be started
}

// Guest agent channel kinds (GuestConfig.Channel).
const (
	ChannelVirtioSerial = "virtio-serial"
	ChannelVsock        = "vsock"
)

// Where the agent channel is, on each kind: the hypervisor backends put it
// there and the guest agent opens it.
const (
	// VsockPort is the vsock port the guest agent listens on (vz).
	VsockPort = 2222
	// SerialName is the virtio-serial port name the guest agent opens
	// (qemu), /dev/virtio-ports/<SerialName> in the guest.
	SerialName = "org.vmdock.agent"
)

// GuestConfig is agent.json on the boot disk, written by the host; the guest
// agent reads it through --config.
type GuestConfig struct {
	Channel string `json:"channel"` // ChannelVirtioSerial or ChannelVsock
	// SerialPath overrides /dev/virtio-ports/<SerialName>.
	SerialPath string `json:"serialPath,omitempty"`
	// VsockPort overrides the package's VsockPort.
	VsockPort uint32 `json:"vsockPort,omitempty"`
	LogLevel  string `json:"logLevel,omitempty"` // debug, info (default), warn, error
}
