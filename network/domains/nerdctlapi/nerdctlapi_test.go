package nerdctlapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A trimmed `nerdctl container inspect` of v2.0.5: a compose service with
// a published port, a host-network container, one with only a network
// entry, and one that stopped between ps and inspect.
const inspectOut = `[
 {"Id":"a1","Created":"2025-01-02T03:04:05.123456789Z","Name":"app-web-1","Image":"docker.io/library/web:latest",
  "State":{"Status":"running","Running":true},
  "Config":{"Labels":{"com.docker.compose.project":"app","com.docker.compose.service":"web","nerdctl/name":"app-web-1","nerdctl/networks":"[\"app_default\"]"}},
  "NetworkSettings":{"Ports":{"80/tcp":[{"HostIp":"0.0.0.0","HostPort":"8080"}],"53/udp":null},"IPAddress":"10.4.0.5","Networks":{"unknown-eth0":{"IPAddress":"10.4.0.5"}}}},
 {"Id":"b2","Created":"2025-01-02T03:04:06Z","Name":"hosted","Image":"docker.io/library/web:latest",
  "State":{"Running":true},
  "Config":{"Labels":{"nerdctl/networks":"[\"host\"]","dev.vmdock.http-port":"3000"}},
  "NetworkSettings":{"Ports":{},"Networks":{"unknown-eth0":{"IPAddress":"192.168.5.15"}}}},
 {"Id":"c3","Created":"2025-01-02T03:04:07Z","Name":"second","Image":"docker.io/library/other:1",
  "State":{"Running":true},
  "Config":{"Labels":{"dev.vmdock.domains":"x.vmdock.localhost"}},
  "NetworkSettings":{"Ports":{},"Networks":{"unknown-eth1":{"IPAddress":"10.4.1.9"},"unknown-eth0":{"IPAddress":""}}}},
 {"Id":"d4","Name":"gone","Image":"docker.io/library/web:latest","State":{"Running":false},"Config":{},"NetworkSettings":{}}
]`

// Its images, in the order asked: web exposes 80 and 443, other 53/udp.
const imagesOut = `[{"Config":{"ExposedPorts":{"80/tcp":{},"443/tcp":{}}}},{"Config":{"ExposedPorts":{"53/udp":{}}}}]`

// fakeGuest answers the commands the client runs.
type fakeGuest struct {
	mu    sync.Mutex
	calls [][]string
	list  string // stdout of the list script
	code  int
	imgs  string
	// events feeds `nerdctl events`; closing it ends the command.
	events chan string
}

func (f *fakeGuest) exec(ctx context.Context, argv []string, stdout, stderr io.Writer) (int, error) {
	f.mu.Lock()
	f.calls = append(f.calls, argv)
	list, code, imgs := f.list, f.code, f.imgs
	f.mu.Unlock()
	switch {
	case argv[0] == "sh":
		if argv[len(argv)-1] != "default" {
			return -1, fmt.Errorf("namespace %q", argv[len(argv)-1])
		}
		fmt.Fprint(stdout, list)
		if code != 0 {
			fmt.Fprint(stderr, "FATA[0000] 1 errors:\nno such container: d4\n")
		}
		return code, nil
	case len(argv) > 4 && argv[3] == "image":
		if imgs == "" {
			fmt.Fprint(stderr, "no such image")
			return 1, nil
		}
		fmt.Fprint(stdout, imgs)
		return 0, nil
	case argv[0] == "nerdctl" && argv[1] == "events":
		for {
			select {
			case ev, ok := <-f.events:
				if !ok {
					return 0, nil
				}
				if _, err := io.WriteString(stdout, ev); err != nil {
					return -1, err
				}
			case <-ctx.Done():
				return -1, ctx.Err()
			}
		}
	}
	return -1, errors.New("unexpected command")
}

func TestContainers(t *testing.T) {
	f := &fakeGuest{list: inspectOut, imgs: imagesOut}
	cs, err := New(f.exec).Containers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 {
		t.Fatalf("%d containers, want 3 (the stopped one left out): %+v", len(cs), cs)
	}
	web, hosted, second := cs[0], cs[1], cs[2]
	if web.ID != "a1" || web.Name != "app-web-1" || web.IP != "10.4.0.5" ||
		web.Labels["com.docker.compose.service"] != "web" ||
		!web.Created.Equal(time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)) ||
		!reflect.DeepEqual(web.Exposed, []int{80, 443}) {
		t.Errorf("web: %+v", web)
	}
	if hosted.IP != "127.0.0.1" || !reflect.DeepEqual(hosted.Exposed, []int{80, 443}) {
		t.Errorf("host network: %+v, want 127.0.0.1 and the image's ports", hosted)
	}
	if second.IP != "10.4.1.9" || len(second.Exposed) != 0 {
		t.Errorf("second: %+v, want the interface with an address, no TCP port", second)
	}
	f.mu.Lock()
	img := f.calls[1]
	f.mu.Unlock()
	if want := []string{"nerdctl", "--namespace", "default", "image", "inspect", "docker.io/library/web:latest", "docker.io/library/other:1"}; !reflect.DeepEqual(img, want) {
		t.Errorf("image inspect: %q, want %q (each image once, in order)", img, want)
	}
}

func TestContainersNone(t *testing.T) {
	f := &fakeGuest{}
	cs, err := New(f.exec).Containers(context.Background())
	if err != nil || cs == nil || len(cs) != 0 {
		t.Fatalf("%v %v, want an empty list", cs, err)
	}
	if len(f.calls) != 1 {
		t.Errorf("calls %q: no image inspect without containers", f.calls)
	}
}

func TestContainersImageGone(t *testing.T) {
	f := &fakeGuest{list: inspectOut}
	cs, err := New(f.exec).Containers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cs[0].Exposed, []int{80}) {
		t.Errorf("web with its image gone: %v, want its published port", cs[0].Exposed)
	}
}

func TestContainersFailure(t *testing.T) {
	f := &fakeGuest{code: 1}
	_, err := New(f.exec).Containers(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no such container: d4") {
		t.Fatalf("err %v, want nerdctl's message", err)
	}
}

func TestWatch(t *testing.T) {
	f := &fakeGuest{events: make(chan string)}
	c := New(f.exec)
	c.Settle = []time.Duration{50 * time.Millisecond}
	var n atomic.Int32
	done := make(chan error, 1)
	go func() { done <- c.Watch(context.Background(), func() { n.Add(1) }) }()
	wait := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for n.Load() != want {
			if time.Now().After(deadline) {
				t.Fatalf("changed %d times, want %d", n.Load(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait(2) // at the start and after the settle delay
	for _, ev := range []string{
		// what nerdctl prints: the JSON, then a blank line
		`{"Timestamp":"2025-01-01T00:00:00Z","ID":"","Namespace":"default","Topic":"/snapshot/prepare","Status":"unknown","Event":"{}"}` + "\n\n",
		`{"Namespace":"buildkit","Topic":"/tasks/start","Event":"{}"}` + "\n\n",
		`{"Namespace":"default","Topic":"/containers/create","Event":"{}"}` + "\n\n",
	} {
		f.events <- ev
	}
	time.Sleep(50 * time.Millisecond)
	wait(2) // none of those changes a name
	f.events <- `{"Namespace":"default","Topic":"/tasks/start","Event":"{\"container_id\":\"a1\"}"}` + "\n\n"
	wait(3)
	f.events <- `{"Namespace":"default","Topic":"/containers/delete"}` + "\n"
	wait(4)
	f.events <- "garbled\n"
	wait(5)
	close(f.events)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "ended") {
			t.Errorf("Watch: %v, want the stream's end", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Watch did not return when the command ended")
	}
}

func TestWatchCancel(t *testing.T) {
	f := &fakeGuest{events: make(chan string)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(f.exec).Watch(ctx, func() {}) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Watch: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Watch did not return on cancel")
	}
}

// TestListScriptInAShell runs the list script in sh against a fake
// nerdctl: ps's IDs go to inspect as separate arguments, and no running
// container means no inspect and no output.
func TestListScriptInAShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	fake := `#!/bin/sh
[ "$1 $2" = "--namespace default" ] || { echo "namespace: $*" >&2; exit 2; }
shift 2
case "$1" in
ps) [ "$2 $3" = "-q --no-trunc" ] || exit 3; cat "$(dirname "$0")/ids" ;;
container) shift 2; printf '[%s]' "$*" ;;
*) exit 4 ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "nerdctl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, argv []string, stdout, stderr io.Writer) (int, error) {
		cmd := exec.CommandContext(ctx, sh, argv[1:]...)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		cmd.Stdout, cmd.Stderr = stdout, stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), nil
		}
		return 0, err
	}
	c := New(run)
	for _, tc := range []struct{ ids, want string }{
		{"", ""},
		{"a1\nb2\n", "[a1 b2]"},
	} {
		if err := os.WriteFile(filepath.Join(dir, "ids"), []byte(tc.ids), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := c.run(context.Background(), "sh", "-c", listScript, "sh", c.namespace())
		if err != nil || string(out) != tc.want {
			t.Errorf("ids %q: %q %v, want %q", tc.ids, out, err, tc.want)
		}
	}
}

// nerdctl, like docker, gives a container its image's labels: the name
// and port labels count only when the container sets its own value.
func TestImageLabelsAreNotTheContainers(t *testing.T) {
	imgs := `[{"Config":{"ExposedPorts":{"80/tcp":{}},"Labels":{"dev.vmdock.http-port":"3000"}}},` +
		`{"Config":{"Labels":{"dev.vmdock.domains":"image.vmdock.localhost"}}}]`
	cs, err := New((&fakeGuest{list: inspectOut, imgs: imgs}).exec).Containers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hosted, second := cs[1], cs[2]
	if _, ok := hosted.Labels["dev.vmdock.http-port"]; ok || hosted.Labels["nerdctl/networks"] == "" {
		t.Errorf("a container with its image's port label only: %v, want that label dropped and the rest kept", hosted.Labels)
	}
	if second.Labels["dev.vmdock.domains"] != "x.vmdock.localhost" {
		t.Errorf("a container that sets its own domains label: %v, want it kept", second.Labels)
	}
}
