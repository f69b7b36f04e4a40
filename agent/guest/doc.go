// Package guest is the guest agent's server: it answers the host's streams
// on the agent channel (vsock or virtio-serial), dispatching each request to
// the feature package that does the job, and runs the setup sequence. Its
// code is linux-only.
package guest
