package hostagent

// defaultClocks is nil on macOS: its wakes come from the system's power
// notifications, not a clock pair.
var defaultClocks hostClocks
