// Package scratch is the host agent route through which `vmdock bench`
// hot-plugs scratch disks into the running VM: the host agent owns the
// hypervisor (QEMU serves one QMP client, and the host agent is it), so the
// bench asks it. Client and server are here together; the command line
// mounts Handler on the host agent's control socket (hostagent.Options.Routes),
// so the host agent itself does not import the bench.
package scratch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Path is the route on the host agent's control socket.
const Path = "/bench/scratch"

// Request attaches (or, with Detach, removes) the scratch disk in Slot.
// DiskSync is the --disk-sync mode whose cache behaviour the disk gets.
type Request struct {
	Slot     int    `json:"slot"`
	DiskSync string `json:"diskSync,omitempty"`
	Detach   bool   `json:"detach,omitempty"`
}

// Reply names the attached disk as the guest sees it.
type Reply struct {
	Serial string `json:"serial,omitempty"`
}

// Machine is what a driver's machine implements to take scratch disks
// (the QEMU driver does; vz cannot add a disk without a reboot).
type Machine interface {
	AttachScratch(ctx context.Context, slot int, diskSync string) (serial string, err error)
	DetachScratch(ctx context.Context, slot int) error
}

// ErrUnsupported is the answer when the VM cannot take disks while it runs.
var ErrUnsupported = errors.New("this VM cannot attach disks while it runs")

// Handler serves Path. machine returns the running machine (nil while
// none runs); anything that is not a Machine gets ErrUnsupported.
func Handler(machine func() any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		var req Request
		if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil {
			http.Error(w, "bad scratch request: "+err.Error(), http.StatusBadRequest)
			return
		}
		mm := machine()
		if mm == nil {
			http.Error(w, "the VM is not running", http.StatusServiceUnavailable)
			return
		}
		m, ok := mm.(Machine)
		if !ok {
			http.Error(w, ErrUnsupported.Error(), http.StatusNotImplemented)
			return
		}
		var rep Reply
		var err error
		if req.Detach {
			err = m.DetachScratch(r.Context(), req.Slot)
		} else {
			rep.Serial, err = m.AttachScratch(r.Context(), req.Slot, req.DiskSync)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rep)
	})
}

// Client asks a host agent over its control socket (http must dial it).
type Client struct{ HTTP *http.Client }

// Attach hot-plugs the scratch disk for diskSync into slot and returns its
// serial.
func (c Client) Attach(ctx context.Context, slot int, diskSync string) (string, error) {
	rep, err := c.do(ctx, Request{Slot: slot, DiskSync: diskSync})
	if err != nil {
		return "", fmt.Errorf("attach scratch disk %d (disk-sync %s): %w", slot, diskSync, err)
	}
	return rep.Serial, nil
}

// Detach removes the scratch disk in slot; the guest must have unmounted it.
func (c Client) Detach(ctx context.Context, slot int) error {
	if _, err := c.do(ctx, Request{Slot: slot, Detach: true}); err != nil {
		return fmt.Errorf("detach scratch disk %d: %w", slot, err)
	}
	return nil
}

func (c Client) do(ctx context.Context, req Request) (Reply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Reply{}, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://host-agent"+Path, bytes.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(hreq)
	if err != nil {
		return Reply{}, fmt.Errorf("ask the host agent: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		// A host agent from before this route: it serves nothing here.
		return Reply{}, fmt.Errorf("%w (the host agent has no %s route; restart the instance with this vmdock)", ErrUnsupported, Path)
	case http.StatusNotImplemented:
		return Reply{}, ErrUnsupported
	default:
		return Reply{}, errors.New(strings.TrimSpace(string(b)))
	}
	var rep Reply
	if err := json.Unmarshal(b, &rep); err != nil {
		return Reply{}, fmt.Errorf("host agent reply %q: %w", b, err)
	}
	return rep, nil
}
