package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sampleLog = `time=2026-12-02T22:49:08.011Z level=INFO msg="qemu started" driver=qemu pid=1543 accel=tcg version=7.2.0
time=2026-12-02T22:49:43.879Z level=INFO msg="guest agent answered" version=x arch=amd64 kernel=6.1.0-old uptime=40.5
time=2026-12-02T22:50:16.303Z level=INFO msg="instance ready" timing="[{Step:image Seconds:9} {Step:agent Seconds:99}]"
time=2026-12-02T22:50:54.073Z level=INFO msg="qemu started" driver=qemu pid=3353 accel=tcg version=7.2.22
time=2026-12-02T22:51:31.274Z level=INFO msg="guest agent answered" version=d552626-dirty arch=amd64 kernel=6.12.118+deb13-amd64 uptime=34.76
time=2026-12-02T22:52:05.780Z level=INFO msg=forwarding proto=tcp guestIP=0.0.0.0 guestPort=5355 host=127.0.0.1:5355
time=2026-12-02T22:52:05.795Z level=INFO msg="instance ready" timing="[{Step:image Seconds:0.560282847} {Step:agent Seconds:36.943053961} {Step:docker Seconds:19.898670127}]"
`

func TestParseBootLog(t *testing.T) {
	b, err := ParseBootLog(strings.NewReader(sampleLog))
	if err != nil {
		t.Fatal(err)
	}
	if b.Accel != "tcg" || b.QEMUVersion != "7.2.22" || b.GuestKernel != "6.12.118+deb13-amd64" || b.HelloUptime != 34.76 {
		t.Errorf("latest boot not kept: %+v", b)
	}
	want := []StepTime{{"image", 0.560282847}, {"agent", 36.943053961}, {"docker", 19.898670127}}
	if len(b.Steps) != len(want) {
		t.Fatalf("steps %+v", b.Steps)
	}
	for i := range want {
		if b.Steps[i] != want[i] {
			t.Errorf("step %d = %+v, want %+v", i, b.Steps[i], want[i])
		}
	}
}

func TestParseBootLogErrors(t *testing.T) {
	for name, log := range map[string]string{
		"empty":    "",
		"no ready": "time=x level=INFO msg=\"qemu started\" accel=tcg\n",
		"bad secs": "time=x level=INFO msg=\"instance ready\" timing=\"[{Step:a Seconds:1.2.3}]\"\n",
	} {
		if _, err := ParseBootLog(strings.NewReader(log)); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// TestBootSectionAgainstRawBoot: vmdock's time to the agent's hello is the
// sum of its steps up to and including "agent", and it is compared with a
// raw-boot baseline already in the report.
func TestBootSectionAgainstRawBoot(t *testing.T) {
	log := filepath.Join(t.TempDir(), "hostagent.log")
	if err := os.WriteFile(log, []byte(sampleLog), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := &Report{}
	rep.Add(Result{Section: "boot", Metric: MetricToHello, Variant: "qemu alone (raw boot)", Value: 30, Unit: "s", Better: Lower})
	r := &runner{env: Env{HostAgentLog: log}, rep: rep}
	if err := r.boot(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep.ComputeRatios()
	var got *Result
	for i := range rep.Results {
		if res := &rep.Results[i]; res.Metric == MetricToHello && res.Variant == "vmdock start" {
			got = res
		}
	}
	if got == nil {
		t.Fatalf("no vmdock row: %+v", rep.Results)
	}
	if want := 0.560282847 + 36.943053961; math.Abs(got.Value-want) > 1e-9 {
		t.Errorf("to hello = %v, want %v (steps through agent, not docker)", got.Value, want)
	}
	if math.Abs(got.Ratio-30/got.Value) > 1e-9 {
		t.Errorf("ratio %v, want %v", got.Ratio, 30/got.Value)
	}
}
