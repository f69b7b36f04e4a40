package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ten := []time.Duration{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", []time.Duration{7}, 99, 7},
		{"p50 of 10", ten, 50, 5},
		{"p90 of 10", ten, 90, 9},
		{"p99 of 10 is the max", ten, 99, 10},
		{"p0 is the min", ten, 0, 1},
		{"p100", ten, 100, 10},
		{"above 100 clamps", ten, 150, 10},
	} {
		if got := Percentile(tc.samples, tc.p); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if ten[0] != 10 {
		t.Error("Percentile sorted the caller's slice")
	}
}

func sampleReport() *Report {
	r := &Report{Machine: Machine{HostOS: "linux", HostArch: "amd64", HostCores: 2, HostKernel: "6.1", Driver: "qemu", Accel: "tcg", QEMUVersion: "7.2.22", GuestCPUs: 2, GuestMemGiB: 2, DiskSync: "fsync"}}
	r.Add(Result{Section: "disk", Metric: "seq write", Variant: "native", Value: 400, Unit: "MB/s", Better: Higher})
	r.Add(Result{Section: "disk", Metric: "seq write", Variant: "9p share", Value: 100, Unit: "MB/s", Better: Higher})
	r.Add(Result{Section: "tree", Metric: "create", Variant: "native", Value: 2, Unit: "s", Better: Lower})
	r.Add(Result{Section: "tree", Metric: "create", Variant: "virtiofs share", Value: 8, Unit: "s", Better: Lower})
	r.Add(Result{Section: "tree", Metric: "create", Variant: "fast", Value: 2, Unit: "s", Better: Lower})
	r.Add(Result{Section: "memory", Metric: "RSS host agent", Variant: "idle", Value: 20.5, Unit: "MiB", Better: Info})
	r.Add(Result{Section: "ports", Metric: "p50", Variant: "zero", Value: 0, Unit: "ms", Better: Lower})
	r.Add(Result{Section: "ports", Metric: "p50", Variant: "fwd", Value: 1, Unit: "ms", Better: Lower})
	r.ComputeRatios()
	return r
}

func TestComputeRatios(t *testing.T) {
	r := sampleReport()
	want := []struct {
		ratio    float64
		baseline bool
	}{{1, true}, {0.25, false}, {1, true}, {0.25, false}, {1, false}, {0, false}, {1, true}, {0, false}}
	for i, w := range want {
		got := r.Results[i]
		if got.Ratio != w.ratio || got.Baseline != w.baseline {
			t.Errorf("%s/%s/%s: ratio %v baseline %v, want %v %v", got.Section, got.Metric, got.Variant, got.Ratio, got.Baseline, w.ratio, w.baseline)
		}
	}
}

func TestWriteTable(t *testing.T) {
	r := sampleReport()
	r.Skipped = []string{"api: no helper"}
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"SECTION  METRIC",
		"disk     seq write       native          400    MB/s  baseline",
		"disk     seq write       9p share        100    MB/s  0.25x",
		"tree     create          fast            2.00   s     1.00x",
		"memory   RSS host agent  idle            20.5   MiB   \n",
		"ports    p50             fwd             1.00   ms    n/a",
		"skipped: api: no helper",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestFormatValue(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, "0"}, {1234.56, "1235"}, {12.345, "12.3"}, {1.2345, "1.23"}, {0.01234, "0.012"}, {-5, "-5.00"}} {
		if got := formatValue(tc.v); got != tc.want {
			t.Errorf("formatValue(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestWriteMachine(t *testing.T) {
	var b bytes.Buffer
	WriteMachine(&b, sampleReport().Machine)
	want := "machine: linux/amd64, 2 cores, kernel 6.1; driver qemu, accel tcg qemu 7.2.22; guest 2 vCPU, 2 GiB, kernel -; disk-sync fsync\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}

func TestWriteSVG(t *testing.T) {
	r := sampleReport()
	r.Results[1].Variant = `9p <&> "share"`
	var b bytes.Buffer
	if err := WriteSVG(&b, r, "vmdock bench"); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML even with markup in labels.
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("svg is not XML: %v\n%s", err, b.String())
			}
			break
		}
	}
	svg := b.String()
	// Bars for the three compared rows only: not baselines, infos or n/a.
	if n := strings.Count(svg, `<rect x=`); n != 3 {
		t.Errorf("%d bars, want 3:\n%s", n, svg)
	}
	for _, want := range []string{"0.25x", "1.00x", "9p &lt;&amp;&gt; &#34;share&#34;"} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
}

func TestWriteJSONRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bench.json")
	r := sampleReport()
	if err := WriteJSON(p, r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != len(r.Results) || back.Results[1].Ratio != 0.25 || back.Machine.Accel != "tcg" {
		t.Errorf("round trip lost data: %+v", back)
	}
}

func TestParseSections(t *testing.T) {
	all, err := ParseSections("")
	if err != nil || len(all) != len(Sections) {
		t.Fatalf("empty: %v %v", all, err)
	}
	got, err := ParseSections("ports, disk,ports")
	if err != nil || strings.Join(got, ",") != "ports,disk" {
		t.Errorf("got %v %v", got, err)
	}
	if _, err := ParseSections("disk,nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("bad section: %v", err)
	}
}

func TestParseDD(t *testing.T) {
	for _, tc := range []struct {
		name  string
		out   string
		bytes int64
		secs  float64
		fail  bool
	}{
		{"gnu", "100+0 records in\n100+0 records out\n104857600 bytes (105 MB, 100 MiB) copied, 0.5 s, 210 MB/s\n", 104857600, 0.5, false},
		{"busybox", "100+0 records in\n100+0 records out\n104857600 bytes (100.0MB) copied, 2.25 seconds, 44.4MB/s\n", 104857600, 2.25, false},
		{"no summary", "dd: error writing: No space left\n", 0, 0, true},
		{"zero secs", "10 bytes copied, 0 s, x\n", 0, 0, true},
	} {
		n, s, err := parseDD(tc.out)
		if (err != nil) != tc.fail || n != tc.bytes || s != tc.secs {
			t.Errorf("%s: got %d %v %v", tc.name, n, s, err)
		}
	}
}

func TestParseVmRSS(t *testing.T) {
	got, err := parseVmRSS("Name:\tx\nVmRSS:\t   20480 kB\nThreads: 3\n")
	if err != nil || got != 20 {
		t.Errorf("got %v %v", got, err)
	}
	for _, bad := range []string{"Name: x\n", "VmRSS: 12 MB\n", "VmRSS: x kB\n"} {
		if _, err := parseVmRSS(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	anon, err := parseStatusMiB("VmRSS:\t 20480 kB\nRssAnon:\t  5120 kB\n", "RssAnon")
	if err != nil || anon != 5 {
		t.Errorf("RssAnon: got %v %v", anon, err)
	}
}
