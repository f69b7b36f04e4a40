// Package runtime is what the guest's container runtimes share: the
// interface the server starts them by, what they are told, containerd's
// configuration (dockerd runs on containerd too) and the units' start.
package runtime
