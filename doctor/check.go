package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Status is a check's verdict. Only Fail makes `vmdock doctor` exit 1: a
// warning is something that works, worse than it could.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Result is one check, as printed and as `doctor --json` emits it; the
// field names are documented in docs/commands.md.
type Result struct {
	Name    string `json:"name"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// ok, warn and fail build a check's result; Run names it.
func ok(format string, args ...any) Result {
	return Result{Status: OK, Message: fmt.Sprintf(format, args...)}
}

func warn(fix, format string, args ...any) Result {
	return Result{Status: Warn, Message: fmt.Sprintf(format, args...), Fix: fix}
}

func fail(fix, format string, args ...any) Result {
	return Result{Status: Fail, Message: fmt.Sprintf(format, args...), Fix: fix}
}

// failIf is Fail when the start needs what is missing, else Warn.
func failIf(needed bool) Status {
	if needed {
		return Fail
	}
	return Warn
}

// check is one row of the report.
type check struct {
	name string
	run  func(ctx context.Context, f Facts) Result
}

// checks in the order they print: the host, then what a start needs from
// it, then the instance.
var checks = []check{
	{"os", checkOS},
	{"signature", checkSignature},
	{"cgo", checkCgo},
	{"rosetta", checkRosetta},
	{"qemu", checkQEMU},
	{"accel", checkAccel},
	{"virtiofsd", checkVirtiofsd},
	{"config", checkConfig},
	{"remote", checkRemote},
	{"image", checkImage},
	{"sockets", checkSockets},
	{"disk", checkDisk},
	{"docker", checkDockerCLI},
	{"docker-credentials", checkDockerCredentials},
	{"docker-context", checkDockerContext},
	{"instance", checkInstance},
	{"guest-dns", checkGuestDNS},
	{"network-paths", checkNetworkPaths},
}

// vmOnly are the checks of what only a VM needs; a remote instance
// passes them.
var vmOnly = map[string]bool{
	"signature": true, "rosetta": true, "qemu": true, "accel": true, "virtiofsd": true,
	"image": true, "disk": true, "guest-dns": true,
}

// Names lists every check in report order.
func Names() []string {
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.name
	}
	return names
}

// Run runs every check against f. The checks are independent, but they run
// one after another: the accelerator probe boots QEMU, and the report
// reads best in a fixed order.
func Run(ctx context.Context, f Facts) Report {
	f = f.memo()
	r := Report{Checks: make([]Result, 0, len(checks))}
	for _, c := range checks {
		var res Result
		if f.Config.IsRemote() && vmOnly[c.name] {
			res = ok("not needed: a remote instance runs no VM")
		} else {
			res = c.run(ctx, f)
		}
		res.Name = c.name
		r.Checks = append(r.Checks, res)
		switch res.Status {
		case OK:
			r.Summary.OK++
		case Warn:
			r.Summary.Warn++
		default:
			r.Summary.Fail++
		}
	}
	return r
}

// Report is every check's result and their count by status.
type Report struct {
	Version string   `json:"version,omitempty"` // vmdock's, to read a pasted report against
	Checks  []Result `json:"checks"`
	Summary Summary  `json:"summary"`
}

// Summary counts the results by status.
type Summary struct {
	OK   int `json:"ok"`
	Warn int `json:"warn"`
	Fail int `json:"fail"`
}

// Failed reports whether any check failed.
func (r Report) Failed() bool { return r.Summary.Fail > 0 }

// WriteText prints one aligned line per check, the fix after the reason,
// then the counts.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range r.Checks {
		line := oneLine(c.Message)
		if c.Fix != "" {
			line += " -> " + oneLine(c.Fix)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Status, line)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	version := ""
	if r.Version != "" {
		version = "vmdock " + r.Version + ": "
	}
	_, err := fmt.Fprintf(w, "\n%s%d ok, %d warn, %d fail\n", version, r.Summary.OK, r.Summary.Warn, r.Summary.Fail)
	return err
}

// WriteJSON prints the report as one indented JSON object.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// oneLine keeps a multi-line error (errors.Join) on its row of the table.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}
