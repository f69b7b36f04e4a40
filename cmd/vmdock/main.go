// Command vmdock gives this machine a Docker engine inside a Linux VM.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Version is set by the Makefile: -ldflags "-X main.Version=...".
var Version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd(detectHost()).ExecuteContext(ctx)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitError carries a command's exit status (ssh's remote command, status
// of a stopped instance) without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitCode prints err, one problem per line, and picks the exit status.
func exitCode(err error, w io.Writer) int {
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintln(w, "vmdock:", line)
	}
	return 1
}
