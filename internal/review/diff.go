package review

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// WriteDiff writes the agent's changes as a unified diff, host (a/) to
// guest (b/); binary files and files too big to read are named, and a
// conflict is marked above its diff.
func (r *Review) WriteDiff(out io.Writer) error {
	root, err := os.OpenRoot(r.w.Host)
	if err != nil {
		return fmt.Errorf("open the workspace: %w", err)
	}
	defer root.Close()
	for _, c := range r.Changes {
		if c.Conflict {
			fmt.Fprintf(out, "# %s: changed on the host too since the sandbox got it; accept refuses it\n", c.Path)
		}
		from, to := "a/"+c.Path, "b/"+c.Path
		if c.Kind == Added {
			from = "/dev/null"
		}
		if c.Kind == Deleted {
			to = "/dev/null"
		}
		if c.Binary {
			fmt.Fprintf(out, "Binary files %s and %s differ\n", from, to)
			continue
		}
		hostText, err := hostText(root, c)
		if err != nil {
			return err
		}
		text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: lines(hostText), B: lines(guestText(c)),
			FromFile: from, ToFile: to, Context: 3,
		})
		if err != nil {
			return err
		}
		if text == "" { // the same text: only the mode changed
			text = fmt.Sprintf("--- %s\n+++ %s\n# executable: %v -> %v\n", from, to, c.host.exec(), c.guest.exec())
		}
		if _, err := io.WriteString(out, text); err != nil {
			return err
		}
	}
	return nil
}

func hostText(root *os.Root, c Change) (string, error) {
	switch {
	case c.host.sig == "":
		return "", nil
	case c.host.isLink():
		return "symlink -> " + strings.TrimPrefix(c.host.sig, "l:") + "\n", nil
	}
	b, err := root.ReadFile(c.Path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", c.Path, err)
	}
	return string(b), nil
}

func guestText(c Change) string {
	if c.guest.isLink() {
		return "symlink -> " + strings.TrimPrefix(c.guest.sig, "l:") + "\n"
	}
	return string(c.guest.content)
}

// lines splits text after each newline; a last line without one gets it,
// marked, as diff(1) does.
func lines(text string) []string {
	if text == "" {
		return nil
	}
	out := strings.SplitAfter(text, "\n")
	if last := out[len(out)-1]; last == "" {
		out = out[:len(out)-1]
	} else {
		out[len(out)-1] = last + "\n\\ No newline at end of file\n"
	}
	return out
}
