// Package bench measures a running vmdock instance: disk and shared-folder
// I/O, port forwarding, the Docker API path, boot steps and memory. Every
// metric is measured side by side with its baseline in the same run and
// reported as a ratio. Only a target an issue set is judged (a Check,
// printed after the table); every other ratio passes or fails nothing.
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"text/tabwriter"
)

// Better says which direction of a value is good, so ratios always read
// as "relative speed": above 1 is better than the baseline.
type Better string

const (
	Higher Better = "higher"
	Lower  Better = "lower"
	Info   Better = "info" // no ratio: a breakdown or a size
)

// Result is one measured value.
type Result struct {
	Section string  `json:"section"`
	Metric  string  `json:"metric"`
	Variant string  `json:"variant"`
	Value   float64 `json:"value"`
	Unit    string  `json:"unit"`
	Better  Better  `json:"better"`
	// Ratio is the speed relative to the first variant of the same
	// metric: value/base when higher is better, base/value otherwise.
	// 0 when there is no ratio (the baseline itself has 1).
	Ratio    float64 `json:"ratio,omitempty"`
	Baseline bool    `json:"baseline,omitempty"`
	Note     string  `json:"note,omitempty"`
}

// Machine describes where the numbers came from; every report carries it.
type Machine struct {
	HostOS      string  `json:"hostOS"`
	HostArch    string  `json:"hostArch"`
	HostCores   int     `json:"hostCores"`
	HostKernel  string  `json:"hostKernel"`
	Driver      string  `json:"driver"`
	Accel       string  `json:"accel"`
	QEMUVersion string  `json:"qemuVersion,omitempty"`
	GuestKernel string  `json:"guestKernel,omitempty"`
	GuestCPUs   int     `json:"guestCPUs"`
	GuestMemGiB float64 `json:"guestMemoryGiB"`
	DiskSync    string  `json:"diskSync"`
	// Remote is a remote instance's ssh:// URL; the guest fields then
	// describe that server.
	Remote string `json:"remote,omitempty"`
}

// Report is one bench run.
type Report struct {
	Time    string   `json:"time"`
	Machine Machine  `json:"machine"`
	Results []Result `json:"results"`
	Skipped []string `json:"skipped,omitempty"` // "section: why"
	Checks  []Check  `json:"checks,omitempty"`
}

// Check is a ratio an issue set a target for, and whether this run met it.
type Check struct {
	Section string  `json:"section"`
	What    string  `json:"what"`
	Ratio   float64 `json:"ratio"`
	Target  float64 `json:"target"` // the least ratio that passes
	Pass    bool    `json:"pass"`
}

// NewCheck judges ratio against target (at least target passes).
func NewCheck(section, what string, ratio, target float64) Check {
	return Check{Section: section, What: what, Ratio: ratio, Target: target, Pass: ratio >= target}
}

// String is the check's line under the table.
func (c Check) String() string {
	verdict := "PASS"
	if !c.Pass {
		verdict = "below target"
	}
	return fmt.Sprintf("target: %s %s = %.2fx (at least %.2fx): %s", c.Section, c.What, c.Ratio, c.Target, verdict)
}

// Add appends a result.
func (r *Report) Add(res Result) { r.Results = append(r.Results, res) }

// ComputeRatios fills Ratio for every result: the first result of each
// (section, metric) is the baseline.
func (r *Report) ComputeRatios() {
	base := map[[2]string]float64{}
	for i := range r.Results {
		res := &r.Results[i]
		res.Ratio, res.Baseline = 0, false
		if res.Better == Info {
			continue
		}
		key := [2]string{res.Section, res.Metric}
		b, ok := base[key]
		if !ok {
			base[key] = res.Value
			res.Ratio, res.Baseline = 1, true
			continue
		}
		res.Ratio = ratio(res.Value, b, res.Better)
	}
}

func ratio(v, base float64, better Better) float64 {
	if v <= 0 || base <= 0 {
		return 0
	}
	if better == Higher {
		return v / base
	}
	return base / v
}

// WriteMachine prints the machine line every run starts with.
func WriteMachine(w io.Writer, m Machine) error {
	if m.Remote != "" {
		_, err := fmt.Fprintf(w, "machine: %s/%s, %d cores, kernel %s; remote engine %s: server %d CPUs, %s GiB, kernel %s\n",
			m.HostOS, m.HostArch, m.HostCores, m.HostKernel, m.Remote,
			m.GuestCPUs, strconv.FormatFloat(m.GuestMemGiB, 'f', 1, 64), orDash(m.GuestKernel))
		return err
	}
	qemu := ""
	if m.QEMUVersion != "" {
		qemu = " qemu " + m.QEMUVersion
	}
	_, err := fmt.Fprintf(w, "machine: %s/%s, %d cores, kernel %s; driver %s, accel %s%s; guest %d vCPU, %s GiB, kernel %s; disk-sync %s\n",
		m.HostOS, m.HostArch, m.HostCores, m.HostKernel, m.Driver, m.Accel, qemu,
		m.GuestCPUs, strconv.FormatFloat(m.GuestMemGiB, 'f', -1, 64), orDash(m.GuestKernel), m.DiskSync)
	return err
}

// WriteTable prints the results as an aligned table. The ratio column is
// relative speed against the first row of the same metric.
func WriteTable(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SECTION\tMETRIC\tVARIANT\tVALUE\tUNIT\tVS BASELINE")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", res.Section, res.Metric, res.Variant,
			formatValue(res.Value), res.Unit, formatRatio(res))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Checks {
		if _, err := fmt.Fprintln(w, c); err != nil {
			return err
		}
	}
	for _, s := range r.Skipped {
		if _, err := fmt.Fprintf(w, "skipped: %s\n", s); err != nil {
			return err
		}
	}
	return nil
}

// formatValue keeps three significant digits or so without scientific
// notation, which is what a reader compares.
func formatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func formatRatio(res Result) string {
	switch {
	case res.Better == Info:
		return ""
	case res.Baseline:
		return "baseline"
	case res.Ratio == 0:
		return "n/a"
	}
	return strconv.FormatFloat(res.Ratio, 'f', 2, 64) + "x"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteJSON saves the report to path.
func WriteJSON(path string, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode bench report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write bench report %s: %w", path, err)
	}
	return nil
}
