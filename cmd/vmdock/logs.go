package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/vmdock/vmdock/vm/store"
)

// logFiles maps `vmdock logs <which>` to the instance's files.
var logFiles = map[string]func(*store.Instance) string{
	"hostagent": (*store.Instance).HostAgentLogPath,
	"serial":    (*store.Instance).SerialLogPath,
	"guest":     (*store.Instance).GuestAgentLogPath,
}

const logNames = "hostagent, serial or guest"

func newLogsCmd(g *globals) *cobra.Command {
	var follow bool
	var lines int
	cmd := &cobra.Command{
		Use:       "logs [hostagent|serial|guest]",
		Short:     "Show the host agent, serial console or guest agent log",
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: []string{"hostagent", "serial", "guest"},
		RunE: func(cmd *cobra.Command, args []string) error {
			which := "hostagent"
			if len(args) == 1 {
				which = args[0]
			}
			pathOf, ok := logFiles[which]
			if !ok {
				return fmt.Errorf("log %q is not accepted; accepted: %s", which, logNames)
			}
			if lines < 0 {
				return fmt.Errorf("--lines %d is not accepted; accepted: 0 (all) or more", lines)
			}
			inst, err := g.existing()
			if err != nil {
				return err
			}
			return showLog(cmd.Context(), cmd.OutOrStdout(), pathOf(inst), lines, follow)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until interrupted")
	cmd.Flags().IntVarP(&lines, "lines", "n", 0, "print only the last N lines (0: all)")
	return cmd
}

// showLog prints the file (or its last n lines) and, when following, polls
// for appended bytes: the writers are other processes, so there is no
// notification to wait on that works on both Linux and macOS.
func showLog(ctx context.Context, w io.Writer, path string, n int, follow bool) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && follow {
		fmt.Fprintf(w, "(waiting for %s)\n", path)
		for errors.Is(err, os.ErrNotExist) {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(250 * time.Millisecond):
			}
			f, err = os.Open(path)
		}
	}
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read log %s: %w", path, err)
	}
	if _, err := w.Write(lastLines(b, n)); err != nil {
		return err
	}
	if !follow {
		return nil
	}
	buf := make([]byte, 32*1024)
	for {
		k, err := f.Read(buf)
		if k > 0 {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return werr
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read log %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func lastLines(b []byte, n int) []byte {
	if n == 0 {
		return b
	}
	trimmed := bytes.TrimRight(b, "\n")
	idx := len(trimmed)
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(trimmed[:idx], '\n')
		if j < 0 {
			return b
		}
		idx = j
	}
	return []byte(strings.TrimPrefix(string(b[idx:]), "\n"))
}
