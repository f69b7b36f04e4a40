package images

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cheggaaa/pb/v3"
	"github.com/cheggaaa/pb/v3/termutil"
)

// ErrDigestMismatch is wrapped by errors for content that is not what its
// digest says.
var ErrDigestMismatch = errors.New("digest mismatch")

// maxUnsizedDownload caps a download whose size nothing states in advance
// (a URL import), so a server cannot fill the disk; far above any disk
// image.
var maxUnsizedDownload int64 = 32 << 30

// errTooLarge is wrapped by the error of a download past the cap; what it
// fetched is not kept for a resume.
var errTooLarge = errors.New("too large")

// download fetches url into the cache as a blob. With a known want digest
// the content is checked against it (and against size, when known), and an
// interrupted download leaves its partial file in tmp/, named by that
// digest, for the next try to resume with an HTTP Range request. Without
// one, the body's sha256 becomes its name. Nothing reaches blobs/ before
// it is whole and checked (a vmdock image against arch, unless ""), so a
// failed or wrong download is never used nor listed.
func (c *Cache) download(ctx context.Context, opts Options, url string, want Digest, size int64, arch, label string) (Digest, int64, error) {
	f, resumable, err := c.downloadFile(want)
	if err != nil {
		return Digest{}, 0, fmt.Errorf("download %s: %w", url, err)
	}
	keep := resumable
	committed := false
	defer func() {
		if !committed {
			f.Close()
			if !keep {
				os.Remove(f.Name())
			}
		}
	}()

	algo := algoOf(want)
	h := Digest{Algo: algo}.newHash()
	have, err := io.Copy(h, f) // what an earlier try left
	if err != nil {
		return Digest{}, 0, fmt.Errorf("download %s: read partial file: %w", url, err)
	}
	if size > 0 && have > size {
		if have, err = restart(f, h); err != nil {
			return Digest{}, 0, fmt.Errorf("download %s: %w", url, err)
		}
	}
	if size <= 0 || have < size {
		if have, err = c.fetchResuming(ctx, opts, url, f, h, have, size, label); err != nil {
			keep = keep && !errors.Is(err, errTooLarge)
			return Digest{}, have, err
		}
	}
	if size > 0 && have != size {
		keep = false
		return Digest{}, have, fmt.Errorf("download %s: %d bytes, but the image manifest says %d (the file was removed and is not used)", url, have, size)
	}
	got := digestOf(algo, h)
	if !want.IsZero() && got != want {
		keep = false
		return Digest{}, have, fmt.Errorf("download %s: %w: want %s, got %s (the file was removed and is not used)", url, ErrDigestMismatch, want, got)
	}
	if err := f.Close(); err != nil {
		return Digest{}, have, fmt.Errorf("download %s: %w", url, err)
	}
	_, settle, err := c.checkFetchedDisk(f.Name(), got, arch)
	if err != nil {
		keep = false
		return Digest{}, have, fmt.Errorf("download %s: %w", url, err)
	}
	if err := settle(commitBlob(f.Name(), c.blobPath(got))); err != nil {
		return Digest{}, have, fmt.Errorf("download %s: store in cache: %w", url, err)
	}
	committed = true
	return got, have, nil
}

// downloadFile opens the partial file for a download of want (positioned
// at its start), or a fresh temp file when want is unknown.
func (c *Cache) downloadFile(want Digest) (f *os.File, resumable bool, err error) {
	if want.IsZero() {
		f, err = c.tempFile("download-*")
		return f, false, err
	}
	f, err = os.OpenFile(c.partialPath(want), os.O_RDWR|os.O_CREATE, 0o644)
	return f, err == nil, err
}

// PartialPrefix starts the names of resumable downloads in tmp/; prune
// keeps them for a week.
const PartialPrefix = "partial-"

func (c *Cache) partialPath(want Digest) string {
	return filepath.Join(c.Dir, "tmp", PartialPrefix+want.key())
}

func restart(f *os.File, h hash.Hash) (int64, error) {
	if err := f.Truncate(0); err != nil {
		return 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	h.Reset()
	return 0, nil
}

// A cut download is resumed within the same start: a flaky network or a
// proxy that drops long transfers should cost a few seconds, not a failed
// start. It gives up only after stalledTriesMax tries in a row that added
// no byte, waiting firstRetryWait, then twice as long each time (at most
// maxRetryWait), between tries.
const (
	stalledTriesMax = 3
	maxRetryWait    = 15 * time.Second
)

// firstRetryWait is a variable so tests need not wait.
var firstRetryWait = time.Second

// fetchResuming runs fetchInto until the file is whole, resuming from
// where each try stopped, and fails when the server answers with a
// refusal (a 4xx) or stops making progress.
func (c *Cache) fetchResuming(ctx context.Context, opts Options, url string, f *os.File, h hash.Hash, have, size int64, label string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return have, fmt.Errorf("download %s: %w", url, err)
	}
	best, stalled, wait := have, 0, firstRetryWait
	for try := 1; ; try++ {
		n, err := c.fetchInto(opts, req.Clone(ctx), f, h, have, size, label)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return n, err
		}
		have = n
		if have > best {
			best, stalled, wait = have, 0, firstRetryWait
		} else if stalled++; stalled >= stalledTriesMax {
			return have, fmt.Errorf("%w (gave up after %d tries without progress)", err, stalled)
		}
		slog.Warn("download cut; resuming", "url", url, "have", have, "try", try, "wait", wait, "err", err)
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "%s: cut after %s, resuming in %s\n", label, mib(have), wait)
		}
		select {
		case <-ctx.Done():
			return have, fmt.Errorf("download %s: %w", url, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, maxRetryWait)
	}
}

// statusError is a server's answer other than the bytes asked for.
type statusError struct {
	url    string
	status string
	code   int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("download %s: server answered %s", e.url, e.status)
}

// retryable tells a cut connection or a busy server, worth another try,
// from a refusal that will not change (not found, forbidden).
func retryable(err error) bool {
	if errors.Is(err, errTooLarge) {
		return false
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.code >= 500 || se.code == http.StatusRequestTimeout || se.code == http.StatusTooManyRequests
	}
	return true
}

// fetchInto appends req's bytes from offset have to f (f and h hold the
// first have bytes), asking for a range when have > 0; a server that
// answers with the whole file makes it start over. It returns how many
// bytes f holds.
func (c *Cache) fetchInto(opts Options, req *http.Request, f *os.File, h hash.Hash, have, size int64, label string) (int64, error) {
	url := req.URL.String()
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	defer cancel(nil)
	stall := time.AfterFunc(stallTimeout, func() { cancel(errStalled) })
	defer stall.Stop()
	resp, err := opts.httpClient().Do(req.WithContext(ctx))
	if err != nil {
		return have, fmt.Errorf("download %s: %w", url, stalledOr(ctx, err))
	}
	defer resp.Body.Close()
	switch {
	case have > 0 && resp.StatusCode == http.StatusPartialContent && rangeStartsAt(resp.Header.Get("Content-Range"), have):
		slog.Info("resuming download", "url", url, "from", have)
	case resp.StatusCode == http.StatusOK:
		if have, err = restart(f, h); err != nil {
			return 0, fmt.Errorf("download %s: %w", url, err)
		}
	default:
		return have, &statusError{url: url, status: resp.Status, code: resp.StatusCode}
	}
	total := size
	if total <= 0 && resp.ContentLength >= 0 {
		total = have + resp.ContentLength
	}
	var body io.Reader = resp.Body
	if size <= 0 {
		if total > maxUnsizedDownload {
			return have, tooLarge(url)
		}
		// one byte past the cap tells a body that goes on from one that ends there
		body = io.LimitReader(resp.Body, maxUnsizedDownload-have+1)
	}
	prog := newProgress(opts.Progress, opts.IsTTY, label, total)
	prog.resumeAt(have)
	n, err := io.Copy(io.MultiWriter(f, h, prog), idleReader{body, stall})
	prog.finish(err == nil)
	have += n
	if size <= 0 && have > maxUnsizedDownload {
		return have, tooLarge(url)
	}
	if err != nil {
		return have, fmt.Errorf("download %s: interrupted after %s: %w", url, mib(have), stalledOr(ctx, err))
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return have, fmt.Errorf("download %s: truncated: got %d of %d bytes", url, n, resp.ContentLength)
	}
	return have, nil
}

// stallTimeout ends a try that receives nothing for this long: a
// connection that went quiet without closing (a Wi-Fi change, a sleeping
// proxy) would otherwise hold the start forever. The next try resumes.
var stallTimeout = time.Minute

var errStalled = errors.New("no data received for a while; the connection stalled")

// stalledOr names a stall as the cause of err when it was one.
func stalledOr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
		return fmt.Errorf("%w (after %s)", errStalled, stallTimeout)
	}
	return err
}

// idleReader pushes the stall timer back on every read that brings bytes.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
}

func (ir idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.timer.Reset(stallTimeout)
	}
	return n, err
}

func tooLarge(url string) error {
	return fmt.Errorf("download %s: %w: more than %s, the most fetched when the size is not known in advance", url, errTooLarge, mib(maxUnsizedDownload))
}

// rangeStartsAt checks a Content-Range header ("bytes 100-199/200")
// against the offset asked for.
func rangeStartsAt(cr string, off int64) bool {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return false
	}
	start, _, ok := strings.Cut(rest, "-")
	return ok && start == strconv.FormatInt(off, 10)
}

// progress reports download progress: a bar on a terminal, otherwise one
// line per 10% (or per 100 MiB when the size is unknown), so logs stay short.
type progress struct {
	w        io.Writer
	label    string
	total    int64
	done     int64
	lastStep int64
	bar      *pb.ProgressBar
}

const unknownSizeStep = 100 << 20

// fallbackBarWidth replaces a terminal's width of zero columns (some CI
// logs, `script` without a size), to which pb would cut the whole bar,
// printing only carriage returns.
const fallbackBarWidth = 80

func newProgress(w io.Writer, tty bool, label string, total int64) *progress {
	p := &progress{w: w, label: label, total: total}
	if w == nil {
		return p
	}
	if tty {
		p.bar = pb.New64(total)
		if total < 0 {
			p.bar.SetTotal(0)
		}
		if cols, err := termutil.TerminalWidth(); err == nil && cols <= 0 {
			p.bar.SetWidth(fallbackBarWidth)
		}
		p.bar.Set(pb.Bytes, true).Set("prefix", label+" ").SetWriter(w).Start()
	}
	return p
}

// resumeAt counts bytes an earlier try already fetched.
func (p *progress) resumeAt(n int64) {
	p.done = n
	if p.total > 0 {
		p.lastStep = n * 10 / p.total
	}
	if p.bar != nil {
		p.bar.SetCurrent(n)
	}
}

func (p *progress) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	switch {
	case p.w == nil:
	case p.bar != nil:
		p.bar.Add(len(b))
	case p.total > 0:
		step := p.done * 10 / p.total
		for p.lastStep < step && p.lastStep < 10 {
			p.lastStep++
			fmt.Fprintf(p.w, "%s: %d%% (%s of %s)\n", p.label, p.lastStep*10, mib(p.lastStep*p.total/10), mib(p.total))
		}
	default:
		for step := p.done / unknownSizeStep; p.lastStep < step; {
			p.lastStep++
			fmt.Fprintf(p.w, "%s: %s\n", p.label, mib(p.lastStep*unknownSizeStep))
		}
	}
	return len(b), nil
}

func (p *progress) finish(ok bool) {
	if p.bar != nil {
		p.bar.Finish()
		return
	}
	if p.w != nil && ok && p.total <= 0 {
		fmt.Fprintf(p.w, "%s: done, %s\n", p.label, mib(p.done))
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
