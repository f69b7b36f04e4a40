package agent

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path"
)

// LoadGuestConfig reads and validates agent.json.
func LoadGuestConfig(p string) (GuestConfig, error) {
	var c GuestConfig
	b, err := os.ReadFile(p)
	if err != nil {
		return c, fmt.Errorf("read agent config: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("parse agent config %s: %w", p, err)
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("agent config %s: %w", p, err)
	}
	return c, nil
}

// Validate checks the fields a person or the host could get wrong.
func (c GuestConfig) Validate() error {
	switch c.Channel {
	case ChannelVirtioSerial, ChannelVsock:
	default:
		return fmt.Errorf("channel %q is not %q or %q", c.Channel, ChannelVirtioSerial, ChannelVsock)
	}
	if _, err := c.Level(); err != nil {
		return err
	}
	return nil
}

// Level maps LogLevel to slog; empty means info.
func (c GuestConfig) Level() (slog.Level, error) {
	switch c.LogLevel {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q is not one of debug, info, warn, error", c.LogLevel)
}

// Serial is the virtio-serial device path the guest opens.
func (c GuestConfig) Serial() string {
	if c.SerialPath != "" {
		return c.SerialPath
	}
	return path.Join("/dev/virtio-ports", SerialName)
}

// Port is the vsock port the guest listens on.
func (c GuestConfig) Port() uint32 {
	if c.VsockPort != 0 {
		return c.VsockPort
	}
	return VsockPort
}
