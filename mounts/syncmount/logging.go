package syncmount

import (
	"bytes"
	"context"
	"log/slog"
	"strings"

	"github.com/mutagen-io/mutagen/pkg/logging"
)

// newMutagenLogger bridges Mutagen's line logger to slog. Mutagen logs
// routine events (connects, loads) at info; they go to slog's debug level so
// that the host agent's log stays quiet unless asked.
func newMutagenLogger(log *slog.Logger) *logging.Logger {
	level := logging.LevelWarn
	if log.Enabled(context.Background(), slog.LevelDebug) {
		level = logging.LevelInfo
	}
	return logging.NewLogger(level, &slogWriter{log: log})
}

// slogWriter receives whole lines such as
// "2006-01-02 15:04:05.000000 [W] [scope] message\n".
type slogWriter struct{ log *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		w.writeLine(string(line))
	}
	return len(p), nil
}

func (w *slogWriter) writeLine(line string) {
	_, rest, ok := strings.Cut(line, " [")
	if !ok || len(rest) < 3 || rest[1] != ']' {
		w.log.Debug(line, "source", "mutagen")
		return
	}
	level := mutagenLevel(rest[0])
	msg := strings.TrimSpace(rest[2:])
	scope := ""
	if strings.HasPrefix(msg, "[") {
		if s, m, ok := strings.Cut(msg[1:], "] "); ok {
			scope, msg = s, m
		}
	}
	w.log.Log(context.Background(), level, msg, "source", "mutagen", "scope", scope)
}

func mutagenLevel(abbrev byte) slog.Level {
	switch abbrev {
	case 'E':
		return slog.LevelError
	case 'W':
		return slog.LevelWarn
	default:
		return slog.LevelDebug
	}
}
