package usernet

import (
	"io"
	"log/slog"
	"sync"

	"github.com/sirupsen/logrus"
)

var libraryLogOnce sync.Once

// routeLibraryLog sends gvisor-tap-vsock's logrus messages to slog at debug
// level instead of stderr: the library logs every NIC disconnect, a normal
// VM stop included, as an error. logrus is process-wide, and this library
// is its only user in vmdock.
func routeLibraryLog(log *slog.Logger) {
	libraryLogOnce.Do(func() {
		logrus.SetOutput(io.Discard)
		logrus.AddHook(slogHook{log: log})
	})
}

type slogHook struct{ log *slog.Logger }

func (slogHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h slogHook) Fire(e *logrus.Entry) error {
	h.log.Debug("gvisor-tap-vsock: "+e.Message, "level", e.Level.String())
	return nil
}
