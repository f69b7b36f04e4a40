package vz

import (
	"fmt"
	"os"
)

// createConsoleLog makes sure the serial log exists, keeping what it holds.
// vz opens an appending serial attachment's file without creating it, and
// the log is missing on a first boot and after each rotation moved it
// aside.
func createConsoleLog(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("vz: create serial log: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("vz: create serial log: %w", err)
	}
	return nil
}
