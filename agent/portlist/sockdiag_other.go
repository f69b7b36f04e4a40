//go:build !linux

package portlist

// SockDiag is Linux-only; the guest is always Linux.
func SockDiag() ([]Port, error) { return nil, ErrNoSockDiag }
