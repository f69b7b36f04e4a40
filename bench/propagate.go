package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// propagate measures how long an edit takes to cross each writable share
// and sync mount: host write -> visible in the guest, and guest write ->
// visible on the host, p50 and p99 over n edits. The guest side is one
// helper process answering over its exec stream; that stream's own round
// trip (an await of content that is already there, on the guest's disk) is
// measured first and taken off, so the numbers are the file system's.
func (r *runner) propagate(ctx context.Context) error {
	if err := r.needHelper(); err != nil {
		return err
	}
	n := 50
	if r.opt.Quick {
		n = 20
	}
	// The native folder exists only once another section made it.
	if _, err := r.sh(ctx, "mkdir -p "+shq(r.native)); err != nil {
		return err
	}
	fs, err := r.startFiles(ctx)
	if err != nil {
		return err
	}
	defer fs.close()
	rtt, err := fs.channelRTT(r.native, n)
	if err != nil {
		return fmt.Errorf("exec channel round trip: %w", err)
	}
	r.rep.Add(Result{Section: "propagate", Metric: "exec channel round trip p50", Variant: "(taken off below)", Value: ms(rtt), Unit: "ms", Better: Info})
	for _, t := range r.targets()[1:] { // the shares and sync mounts
		if t.guestOnly {
			continue // nothing propagates: the host never sees it
		}
		dir := filepath.Join(t.dir, "propagate")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		h2g, err := fs.hostToGuest(dir, n, rtt)
		if err != nil {
			r.rep.Skipped = append(r.rep.Skipped, fmt.Sprintf("propagate %s host->guest: %v", t.name, err))
			continue
		}
		g2h, err := fs.guestToHost(dir, n, rtt/2)
		if err != nil {
			r.rep.Skipped = append(r.rep.Skipped, fmt.Sprintf("propagate %s guest->host: %v", t.name, err))
			continue
		}
		for _, row := range []struct {
			metric string
			d      []time.Duration
		}{{"host edit -> guest", h2g}, {"guest write -> host", g2h}} {
			for _, p := range []float64{50, 99} {
				r.rep.Add(Result{Section: "propagate", Metric: fmt.Sprintf("%s p%.0f", row.metric, p), Variant: t.name, Value: ms(Percentile(row.d, p)), Unit: "ms", Better: Lower})
			}
		}
		_ = os.RemoveAll(dir)
	}
	if r.env.SyncFlush != nil {
		if err := r.syncCost(ctx); err != nil {
			r.rep.Skipped = append(r.rep.Skipped, "propagate sync cost: "+err.Error())
		}
	}
	return nil
}

// guestFiles is the helper's `files` server in the guest.
type guestFiles struct {
	in   io.WriteCloser
	out  *bufio.Reader
	done chan error
}

func (r *runner) startFiles(ctx context.Context) (*guestFiles, error) {
	pr, pw := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	g := &guestFiles{in: pw, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		code, err := r.env.Exec(ctx, []string{r.helper, "files"}, pr, outW, &errb)
		if err == nil && code != 0 {
			err = fmt.Errorf("exited %d: %s", code, strings.TrimSpace(errb.String()))
		}
		outW.CloseWithError(io.EOF)
		g.done <- err
	}()
	return g, nil
}

func (g *guestFiles) close() {
	g.in.Close()
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
	}
}

// ask sends one request and waits for its answer.
func (g *guestFiles) ask(op, path, content string) error {
	if _, err := fmt.Fprintf(g.in, "%s %s %s\n", op, path, content); err != nil {
		return err
	}
	line, err := g.out.ReadString('\n')
	if err != nil {
		return fmt.Errorf("guest helper: %w", err)
	}
	if line = strings.TrimSpace(line); line != "ok" {
		return errors.New(strings.TrimPrefix(line, "error "))
	}
	return nil
}

// channelRTT is the p50 of an await that is satisfied at once.
func (g *guestFiles) channelRTT(guestDir string, n int) (time.Duration, error) {
	f := filepath.Join(guestDir, "propagate-rtt")
	if err := g.ask("write", f, "x"); err != nil {
		return 0, err
	}
	var ds []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := g.ask("await", f, "x"); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	return Percentile(ds, 50), nil
}

func (g *guestFiles) hostToGuest(dir string, n int, rtt time.Duration) ([]time.Duration, error) {
	var ds []time.Duration
	f := filepath.Join(dir, "from-host")
	for i := 0; i < n; i++ {
		content := fmt.Sprintf("h%d-%d", i, time.Now().UnixNano())
		start := time.Now()
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			return nil, err
		}
		if err := g.ask("await", f, content); err != nil {
			return nil, err
		}
		ds = append(ds, max(0, time.Since(start)-rtt))
		time.Sleep(20 * time.Millisecond) // let the next edit be a fresh one, not part of a burst
	}
	return ds, nil
}

func (g *guestFiles) guestToHost(dir string, n int, oneWay time.Duration) ([]time.Duration, error) {
	var ds []time.Duration
	f := filepath.Join(dir, "from-guest")
	for i := 0; i < n; i++ {
		content := fmt.Sprintf("g%d-%d", i, time.Now().UnixNano())
		start := time.Now()
		answered := make(chan error, 1)
		go func() { answered <- g.ask("write", f, content) }()
		deadline := start.Add(10 * time.Second)
		for {
			if b, err := os.ReadFile(f); err == nil && string(b) == content {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("%s: the guest's write did not reach the host within 10 s", f)
			}
			time.Sleep(time.Millisecond)
		}
		ds = append(ds, max(0, time.Since(start)-oneWay))
		if err := <-answered; err != nil {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ds, nil
}
