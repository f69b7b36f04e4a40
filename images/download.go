package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/cheggaaa/pb/v3"

	"github.com/vmdock/vmdock/atomicfile"
)

// ErrDigestMismatch is wrapped by errors for content that is not what its
// digest says.
var ErrDigestMismatch = errors.New("digest mismatch")

// download fetches url into the cache as a blob. With a known want digest
// the content is checked against it; otherwise its sha256 becomes its name.
// The body goes to a temp file first, so a failed or wrong download never
// touches what is already cached.
func (c *Cache) download(ctx context.Context, opts Options, url string, want Digest, label string) (Digest, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Digest{}, 0, fmt.Errorf("download %s: %w", url, err)
	}
	resp, err := opts.httpClient().Do(req)
	if err != nil {
		return Digest{}, 0, fmt.Errorf("download %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Digest{}, 0, fmt.Errorf("download %s: server answered %s", url, resp.Status)
	}

	tmp, err := c.tempFile("download-*")
	if err != nil {
		return Digest{}, 0, err
	}
	keep := false
	defer func() {
		if !keep {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()

	algo := algoOf(want)
	h := Digest{Algo: algo}.newHash()
	prog := newProgress(opts.Progress, opts.IsTTY, label, resp.ContentLength)
	n, err := io.Copy(io.MultiWriter(tmp, h, prog), resp.Body)
	prog.finish(err == nil)
	if err != nil {
		return Digest{}, 0, fmt.Errorf("download %s: after %d bytes: %w", url, n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return Digest{}, 0, fmt.Errorf("download %s: truncated: got %d of %d bytes", url, n, resp.ContentLength)
	}
	got := digestOf(algo, h)
	if !want.IsZero() && got != want {
		return Digest{}, 0, fmt.Errorf("download %s: %w: want %s, got %s", url, ErrDigestMismatch, want, got)
	}
	if err := tmp.Close(); err != nil {
		return Digest{}, 0, fmt.Errorf("download %s: %w", url, err)
	}
	if err := checkFetchedDisk(tmp.Name()); err != nil {
		return Digest{}, 0, fmt.Errorf("download %s: %w", url, err)
	}
	if err := atomicfile.Commit(tmp.Name(), c.blobPath(got)); err != nil {
		return Digest{}, 0, fmt.Errorf("download %s: store in cache: %w", url, err)
	}
	keep = true
	return got, n, nil
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
		p.bar.Set(pb.Bytes, true).Set("prefix", label+" ").SetWriter(w).Start()
	}
	return p
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
