package agent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/vmdock/vmdock/mounts/watch"
)

// A report makes the host run a sync cycle, and a cycle scans the whole
// copy and reads what changed: work that competes with the container
// still writing. So a burst (an install, a build) is reported once it
// pauses, or every syncWatchMaxDelay while it lasts, and the watcher
// wakes every syncWatchBurstPause in it instead of every 20 ms.
const (
	syncWatchQuiet      = 250 * time.Millisecond
	syncWatchBurstPause = 200 * time.Millisecond
	syncWatchMaxDelay   = 5 * time.Second
)

// ServeSyncWatch answers an OpSyncWatch stream whose mounts the server
// checked and turned into trees: after the OK, one SyncChange line per
// changed mount after a burst went quiet, until the host closes st. It
// closes st.
func ServeSyncWatch(ctx context.Context, st net.Conn, trees []watch.Tree, log *slog.Logger) {
	defer st.Close()
	w, err := watch.New(trees, watch.Options{Quiet: syncWatchQuiet, BurstPause: syncWatchBurstPause, MaxDelay: syncWatchMaxDelay, Logger: log})
	if err != nil {
		_ = Reply(st, err)
		return
	}
	defer w.Close()
	if err := Reply(st, nil); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the host closing the stream ends the watch
		io.Copy(io.Discard, st)
		cancel()
	}()
	w.Deliver(ctx, func(id string) bool {
		return WriteJSONLine(st, SyncChange{ID: id}) == nil
	})
}
