// Command doctorcheck reads `vmdock doctor --json` on stdin and fails
// unless each named check has one of the statuses it is allowed:
//
//	vmdock doctor --json | go run ./hack/ci/doctorcheck signature=ok cgo=ok rosetta=ok,warn
//
// The macOS workflow runs it (hack/ci/mac-doctor.sh): a Mac build that is
// unsigned or built without cgo cannot run vz, whatever else works.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/vmdock/vmdock/doctor"
)

func main() {
	wants, err := parseWants(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "doctorcheck:", err)
		os.Exit(2)
	}
	r, err := readReport(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doctorcheck:", err)
		os.Exit(1)
	}
	problems := Check(r, wants)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "doctorcheck:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Printf("doctorcheck: %d checks as wanted\n", len(wants))
}

// want is one argument: a check's name and the statuses it may have.
type want struct {
	name    string
	allowed []doctor.Status
}

// parseWants reads NAME=STATUS[,STATUS...] arguments.
func parseWants(args []string) ([]want, error) {
	if len(args) == 0 {
		return nil, errors.New("usage: doctorcheck NAME=STATUS[,STATUS...]... (statuses: ok, warn, fail)")
	}
	var out []want
	for _, a := range args {
		name, list, ok := strings.Cut(a, "=")
		if !ok || name == "" || list == "" {
			return nil, fmt.Errorf("argument %q: want NAME=STATUS[,STATUS...]", a)
		}
		if !slices.Contains(doctor.Names(), name) {
			return nil, fmt.Errorf("argument %q: no check %q (checks: %s)", a, name, strings.Join(doctor.Names(), ", "))
		}
		w := want{name: name}
		for _, s := range strings.Split(list, ",") {
			st := doctor.Status(s)
			if st != doctor.OK && st != doctor.Warn && st != doctor.Fail {
				return nil, fmt.Errorf("argument %q: status %q (accepted: ok, warn, fail)", a, s)
			}
			w.allowed = append(w.allowed, st)
		}
		out = append(out, w)
	}
	return out, nil
}

func readReport(r io.Reader) (doctor.Report, error) {
	var rep doctor.Report
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return rep, fmt.Errorf("stdin is not vmdock doctor --json output: %w", err)
	}
	if len(rep.Checks) == 0 {
		return rep, errors.New("the report has no checks")
	}
	return rep, nil
}

// Check returns one line per wanted check that is missing from r or has a
// status it may not have, with the check's message and fix.
func Check(r doctor.Report, wants []want) []string {
	var problems []string
	for _, w := range wants {
		i := slices.IndexFunc(r.Checks, func(c doctor.Result) bool { return c.Name == w.name })
		if i < 0 {
			problems = append(problems, fmt.Sprintf("check %s: not in the report", w.name))
			continue
		}
		c := r.Checks[i]
		if slices.Contains(w.allowed, c.Status) {
			fmt.Printf("check %s: %s (%s)\n", c.Name, c.Status, c.Message)
			continue
		}
		p := fmt.Sprintf("check %s: %s, want %s: %s", c.Name, c.Status, joinStatuses(w.allowed), c.Message)
		if c.Fix != "" {
			p += " (fix: " + c.Fix + ")"
		}
		problems = append(problems, p)
	}
	return problems
}

func joinStatuses(s []doctor.Status) string {
	out := make([]string, len(s))
	for i, st := range s {
		out[i] = string(st)
	}
	return strings.Join(out, " or ")
}
