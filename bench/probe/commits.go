package probe

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Commit record sizes: a row's log record, then the small commit marker a
// database writes after it, each made durable before the next step.
const (
	CommitRecordBytes = 512
	CommitMarkerBytes = 64
)

// Commits is the database-shaped sync workload: n transactions, each
// appending a record to a log file, fdatasync, appending a commit marker,
// fdatasync. Two flushes per transaction is what a write-ahead log pays
// (SQLite WAL commit, InnoDB redo log with binlog), so the rate follows
// --disk-sync as a database in a container does. dir must exist; the log
// is removed afterwards.
func Commits(dir string, n int) (time.Duration, error) {
	if n < 1 {
		return 0, fmt.Errorf("commits: n must be >= 1 (got %d)", n)
	}
	path := filepath.Join(dir, "commits.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("commits: %w", err)
	}
	defer os.Remove(path)
	defer f.Close()
	start := time.Now()
	if err := commitLoop(f, n, func() error { return fdatasync(f) }); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// commitLoop writes n transactions to w, calling sync after the record and
// after the marker of each.
func commitLoop(w io.Writer, n int, sync func() error) error {
	record := make([]byte, CommitRecordBytes)
	marker := make([]byte, CommitMarkerBytes)
	for i := 0; i < n; i++ {
		fill(record, i)
		fill(marker, ^i)
		for _, b := range [][]byte{record, marker} {
			if _, err := w.Write(b); err != nil {
				return fmt.Errorf("commits: transaction %d: %w", i, err)
			}
			if err := sync(); err != nil {
				return fmt.Errorf("commits: transaction %d: %w", i, err)
			}
		}
	}
	return nil
}

// fill makes each record distinct, so no layer can skip it as unchanged
// or as zeroes (QEMU's detect-zeroes would).
func fill(b []byte, seq int) {
	for i := range b {
		b[i] = byte(seq>>(8*(i%4))) ^ byte(i) | 1
	}
}
