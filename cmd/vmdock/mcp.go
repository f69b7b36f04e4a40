package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/internal/review"
	"github.com/vmdock/vmdock/vm/store"
)

// MCP tool limits: what one call may take and return.
const (
	mcpDefaultTimeout = 2 * time.Minute
	mcpMaxTimeout     = 30 * time.Minute
	mcpMaxOutput      = 1 << 20
)

func newMCPCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "mcp", Short: "Model Context Protocol server for a sandbox"}
	cmd.AddCommand(&cobra.Command{
		Use:   "serve [NAME]",
		Short: "Serve a sandbox's tools (run, files, diff, accept, reject) over MCP on stdio",
		Long: "An MCP server on stdin/stdout for a host-side agent: it runs commands in the sandbox's guest and reads, writes, lists " +
			"and searches its copy of the workspace; the host's folder changes only through accept. NAME defaults to --profile.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := g.profile
			if len(args) == 1 {
				name = args[0]
			}
			return serveMCP(cmd.Context(), g, name, os.Stdin, os.Stdout)
		},
	})
	return cmd
}

// serveMCP serves sandbox name's tools on in/out until the client
// leaves.
func serveMCP(ctx context.Context, g *globals, name string, in io.ReadCloser, out io.WriteCloser) error {
	inst, ws, err := sandboxInstanceConfig(g, name)
	if err != nil {
		return err
	}
	t := &sandboxTools{inst: inst, ws: ws, review: review.Workspace{Host: ws, GuestPath: ws, BasePath: inst.SandboxBasePath(), Guest: guestRunner(inst)}}
	server := mcp.NewServer(&mcp.Implementation{Name: "vmdock-sandbox", Version: Version}, nil)
	t.register(server)
	err = server.Run(ctx, &mcp.IOTransport{Reader: in, Writer: out})
	if err != nil && (errors.Is(err, io.EOF) || ctx.Err() != nil) {
		return nil
	}
	return err
}

// sandboxTools act on one sandbox: commands and files in its guest, the
// review of its workspace.
type sandboxTools struct {
	inst   *store.Instance
	ws     string
	review review.Workspace
}

type runIn struct {
	Command        string `json:"command" jsonschema:"a shell command, run by sh -c in the workspace inside the sandbox"`
	TimeoutSeconds int    `json:"timeoutSeconds,omitempty" jsonschema:"seconds before the command is stopped; default 120, at most 1800"`
}

type runOut struct {
	ExitCode int    `json:"exitCode"`
	Output   string `json:"output" jsonschema:"stdout and stderr, interleaved, the first 1 MiB"`
	TimedOut bool   `json:"timedOut,omitempty"`
}

type pathIn struct {
	Path string `json:"path" jsonschema:"a path relative to the workspace"`
}

type writeIn struct {
	Path    string `json:"path" jsonschema:"a path relative to the workspace"`
	Content string `json:"content"`
}

type searchIn struct {
	Pattern string `json:"pattern" jsonschema:"a grep basic regular expression"`
	Path    string `json:"path,omitempty" jsonschema:"a folder relative to the workspace; default the whole workspace"`
}

type textOut struct {
	Text string `json:"text"`
}

type pathsIn struct {
	Paths []string `json:"paths,omitempty" jsonschema:"paths relative to the workspace; none: every change"`
}

type acceptOut struct {
	Accepted []string         `json:"accepted"`
	Refused  []review.Refusal `json:"refused,omitempty"`
}

func (t *sandboxTools) register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "run", Description: "Run a shell command in the sandbox's workspace; output is streamed as progress when the client asks for it"}, t.run)
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "Read a file of the sandbox's workspace"}, t.readFile)
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Write a file of the sandbox's workspace (the host's folder changes only on accept)"}, t.writeFile)
	mcp.AddTool(s, &mcp.Tool{Name: "list_files", Description: "List a folder of the sandbox's workspace (folders end in /)"}, t.listFiles)
	mcp.AddTool(s, &mcp.Tool{Name: "search_files", Description: "Search the sandbox's workspace with grep"}, t.searchFiles)
	mcp.AddTool(s, &mcp.Tool{Name: "diff", Description: "The sandbox's changes to the workspace as a unified diff"}, t.diff)
	mcp.AddTool(s, &mcp.Tool{Name: "accept", Description: "Write the sandbox's changes into the host's workspace; files the host changed meanwhile are refused"}, t.accept)
	mcp.AddTool(s, &mcp.Tool{Name: "reject", Description: "Drop the sandbox's changes: the guest gets the host's version back"}, t.reject)
}

func (t *sandboxTools) run(ctx context.Context, req *mcp.CallToolRequest, in runIn) (*mcp.CallToolResult, runOut, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, runOut{}, errors.New("command is empty; accepted: a shell command")
	}
	timeout := mcpDefaultTimeout
	if in.TimeoutSeconds > 0 {
		timeout = min(time.Duration(in.TimeoutSeconds)*time.Second, mcpMaxTimeout)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := &streamedOutput{ctx: ctx, req: req}
	code, err := execVMIn(rctx, t.inst, t.ws, []string{"sh", "-c", in.Command}, strings.NewReader(""), out, out)
	res := runOut{ExitCode: code, Output: out.String(), TimedOut: rctx.Err() != nil && ctx.Err() == nil}
	if err != nil && !res.TimedOut {
		return nil, res, err
	}
	return nil, res, nil
}

// streamedOutput keeps a command's output (up to mcpMaxOutput) and sends
// each chunk as a progress notification when the client gave a token.
type streamedOutput struct {
	ctx  context.Context
	req  *mcp.CallToolRequest
	mu   sync.Mutex
	buf  bytes.Buffer
	sent float64
}

func (o *streamedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if room := mcpMaxOutput - o.buf.Len(); room > 0 {
		o.buf.Write(p[:min(len(p), room)])
	}
	if token := o.req.Params.GetProgressToken(); token != nil && o.req.Session != nil {
		o.sent++
		_ = o.req.Session.NotifyProgress(o.ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Message: string(p), Progress: o.sent})
	}
	return len(p), nil
}

func (o *streamedOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
