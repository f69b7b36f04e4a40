package router

import (
	"log"
	"log/slog"
)

// slogErrorLog sends net/http's own complaints (TLS handshakes a browser
// gave up on, mostly) to slog at debug: they are noise at info.
func slogErrorLog() *log.Logger {
	return slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug)
}
