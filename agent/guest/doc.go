// Package guest is the guest agent's server: it answers the host's streams
// on the agent channel (vsock or virtio-serial) and prepares the Linux guest
// (disks, mounts, dockerd, host access). Its code is linux-only.
package guest
