package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// workspacePath checks an agent's path: relative, inside the workspace.
// The guest checks it again with symlinks resolved (inGuestPath).
func workspacePath(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	clean := path.Clean(p)
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q is outside the workspace; accepted: a path relative to the workspace, inside it", p)
	}
	return clean, nil
}

// inGuestPath is a shell prologue run in the guest: $1 the workspace, $2
// the path; it sets r to the path with symlinks resolved and refuses one
// that leads out of the workspace, then runs op.
func inGuestPath(op string) string {
	return `ws=$1 p=$2; r=$(realpath -m -- "$ws/$p") || exit 3; case "$r" in "$ws"|"$ws"/*) ;; *) echo "path $p leads outside the workspace (a symlink out); accepted: a path inside it" >&2; exit 3;; esac; ` + op
}

// inGuest runs op on path p in the guest's copy of the workspace.
func (t *sandboxTools) inGuest(ctx context.Context, p, op string, stdin io.Reader, extra ...string) (string, error) {
	clean, err := workspacePath(p)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	argv := append([]string{"sh", "-c", inGuestPath(op), "sh", t.ws, clean}, extra...)
	if err := t.review.Guest(ctx, argv, stdin, &out); err != nil {
		return "", err
	}
	return out.String(), nil
}

func (t *sandboxTools) readFile(ctx context.Context, _ *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, textOut, error) {
	s, err := t.inGuest(ctx, in.Path, `head -c 1048576 -- "$r"`, nil)
	return nil, textOut{Text: s}, err
}

func (t *sandboxTools) writeFile(ctx context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, textOut, error) {
	_, err := t.inGuest(ctx, in.Path, `mkdir -p -- "$(dirname -- "$r")" && cat > "$r"`, strings.NewReader(in.Content))
	return nil, textOut{Text: fmt.Sprintf("wrote %d bytes to %s", len(in.Content), in.Path)}, err
}

func (t *sandboxTools) listFiles(ctx context.Context, _ *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, textOut, error) {
	s, err := t.inGuest(ctx, in.Path, `ls -Ap -- "$r"`, nil)
	return nil, textOut{Text: s}, err
}

func (t *sandboxTools) searchFiles(ctx context.Context, _ *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, textOut, error) {
	// grep exits 1 when nothing matches: not a failure here.
	s, err := t.inGuest(ctx, in.Path, `cd -- "$r" && { grep -rnI --exclude-dir=.git -e "$3" . | head -n 1000; true; }`, nil, in.Pattern)
	return nil, textOut{Text: s}, err
}

func (t *sandboxTools) diff(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, textOut, error) {
	r, err := t.review.Read(ctx)
	if err != nil {
		return nil, textOut{}, err
	}
	var out bytes.Buffer
	err = r.WriteDiff(&out)
	return nil, textOut{Text: out.String()}, err
}

func (t *sandboxTools) accept(ctx context.Context, _ *mcp.CallToolRequest, in pathsIn) (*mcp.CallToolResult, acceptOut, error) {
	r, err := t.review.Read(ctx)
	if err != nil {
		return nil, acceptOut{}, err
	}
	accepted, refused, err := r.Accept(in.Paths)
	return nil, acceptOut{Accepted: nonNil(accepted), Refused: refused}, err
}

func (t *sandboxTools) reject(ctx context.Context, _ *mcp.CallToolRequest, in pathsIn) (*mcp.CallToolResult, acceptOut, error) {
	r, err := t.review.Read(ctx)
	if err != nil {
		return nil, acceptOut{}, err
	}
	rejected, err := r.Reject(ctx, in.Paths)
	return nil, acceptOut{Accepted: nonNil(rejected)}, err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
