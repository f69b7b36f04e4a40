package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vmdock/vmdock/vm/store"
)

// localGuestExec makes the fake guest run commands on this machine, its
// copy of workspace ws in guest: every argument (and working folder)
// naming ws names guest instead.
func localGuestExec(t *testing.T, ws, guest string) {
	t.Helper()
	runLocal := func(ctx context.Context, dir string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		args := slices.Clone(argv)
		for i, a := range args {
			if a == ws {
				args[i] = guest
			}
		}
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		if dir == ws {
			cmd.Dir = guest
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
		cmd.WaitDelay = time.Second // a killed sh's children keep its output open
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), ctx.Err()
		}
		return 0, err
	}
	execVM = func(ctx context.Context, _ *store.Instance, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		return runLocal(ctx, "", argv, stdin, stdout, stderr)
	}
	execVMIn = func(ctx context.Context, _ *store.Instance, dir string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		return runLocal(ctx, dir, argv, stdin, stdout, stderr)
	}
}

// The MCP tools through the Go SDK's own client over real pipes: a
// command's output streamed and its exit code, a timeout, files written,
// read, listed and searched in the guest's copy only, paths out of the
// workspace refused (../ and a symlink out), and the diff, accept and
// reject of what the agent wrote.
func TestMCPServeSandboxTools(t *testing.T) {
	env(t)
	installFake(t)
	ws, guest := t.TempDir(), t.TempDir()
	writeTestFile(t, filepath.Join(ws, "a.txt"), "a\n")
	if _, err := run("sandbox", "create", "agent", "--workspace", ws); err != nil {
		t.Fatal(err)
	}
	copyDir(t, ws, guest)
	if err := os.Symlink("/etc", filepath.Join(guest, "out")); err != nil {
		t.Fatal(err)
	}
	localGuestExec(t, ws, guest)
	session, progress := mcpSession(t)

	names := []string{}
	tools, err := session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if got := strings.Join(names, ","); got != "accept,diff,list_files,read_file,reject,run,search_files,write_file" {
		t.Fatalf("tools: %s", got)
	}
	var ran runOut
	callTool(t, session, "run", map[string]any{"command": "echo hello; pwd; exit 3"}, &ran, true)
	if ran.ExitCode != 3 || !strings.Contains(ran.Output, "hello\n"+guest+"\n") {
		t.Errorf("run: %+v", ran)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(progress(), "hello"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run's output never came as progress: %q", progress())
		}
	}
	callTool(t, session, "run", map[string]any{"command": "sleep 20", "timeoutSeconds": 1}, &ran, false)
	if !ran.TimedOut {
		t.Errorf("run past its timeout: %+v", ran)
	}
	var text textOut
	callTool(t, session, "write_file", map[string]any{"path": "src/new.go", "content": "package src\n"}, &text, false)
	if readTestFile(t, filepath.Join(guest, "src/new.go")) != "package src\n" {
		t.Fatal("write_file did not write the guest's copy")
	}
	if _, err := os.Stat(filepath.Join(ws, "src")); !os.IsNotExist(err) {
		t.Fatal("write_file reached the host's workspace")
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"read_file", map[string]any{"path": "a.txt"}, "a\n"},
		{"list_files", map[string]any{"path": ""}, "src/\n"},
		{"search_files", map[string]any{"pattern": "package"}, "./src/new.go:1:package src"},
	} {
		callTool(t, session, c.tool, c.args, &text, false)
		if !strings.Contains(text.Text, c.want) {
			t.Errorf("%s %v: %q, want %q in it", c.tool, c.args, text.Text, c.want)
		}
	}
	for p, want := range map[string]string{"../etc/passwd": "outside the workspace", "/etc/passwd": "outside the workspace", "out/hostname": "leads outside the workspace"} {
		res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": p}})
		if err != nil || !res.IsError || !strings.Contains(resultText(res), want) {
			t.Errorf("read_file %s: %v %v; want an error saying %q", p, resultText(res), err, want)
		}
	}
	callTool(t, session, "diff", map[string]any{}, &text, false)
	if !strings.Contains(text.Text, "+++ b/src/new.go") || strings.Contains(text.Text, "a.txt") {
		t.Errorf("diff: %q", text.Text)
	}
	var accepted acceptOut
	callTool(t, session, "accept", map[string]any{"paths": []string{"src"}}, &accepted, false)
	if len(accepted.Accepted) != 1 || readTestFile(t, filepath.Join(ws, "src/new.go")) != "package src\n" {
		t.Errorf("accept src: %+v", accepted)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from+"/.", to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
}

// mcpSession serves the sandbox "agent" on one pair of OS pipes and
// connects the SDK's client on the other ends; progress returns the
// progress messages seen so far.
func mcpSession(t *testing.T) (*mcp.ClientSession, func() string) {
	t.Helper()
	serverIn, clientOut, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	clientIn, serverOut, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveMCP(ctx, &globals{profile: "default", host: testHost}, "agent", serverIn, serverOut)
	}()
	var mu sync.Mutex
	var messages strings.Builder
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			messages.WriteString(req.Params.Message)
			mu.Unlock()
		},
	})
	session, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		session.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mcp serve: %v", err)
		}
	})
	return session, func() string { mu.Lock(); defer mu.Unlock(); return messages.String() }
}

func callTool(t *testing.T, s *mcp.ClientSession, name string, args map[string]any, out any, withProgress bool) {
	t.Helper()
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if withProgress {
		// SetProgressToken drops the token when Meta is nil (go-sdk v1.2.0).
		params.Meta = mcp.Meta{"progressToken": "p1"}
	}
	res, err := s.CallTool(context.Background(), params)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: %s", name, resultText(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v: %s", name, err, b)
	}
}

func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
