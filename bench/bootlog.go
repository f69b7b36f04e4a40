package bench

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// StepTime is one host agent boot step.
type StepTime struct {
	Step    string
	Seconds float64
}

// BootLog is what the host agent log tells about the latest boot.
type BootLog struct {
	Steps       []StepTime // from "instance ready"
	HelloUptime float64    // guest uptime (s) when the agent answered: kernel + init time
	Accel       string
	QEMUVersion string
	GuestKernel string
}

var (
	stepRe = regexp.MustCompile(`\{Step:(\S+) Seconds:([0-9.eE+-]+)\}`)
	attrRe = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)
)

// ParseBootLog reads a hostagent.log (slog text format) and keeps the
// latest boot's facts; earlier boots in the same log are overwritten as
// the scan goes.
func ParseBootLog(r io.Reader) (BootLog, error) {
	var b BootLog
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		attrs := parseAttrs(sc.Text())
		switch attrs["msg"] {
		case "qemu started":
			b = BootLog{Accel: attrs["accel"], QEMUVersion: attrs["version"]}
		case "guest agent answered":
			b.GuestKernel = attrs["kernel"]
			b.HelloUptime, _ = strconv.ParseFloat(attrs["uptime"], 64)
		case "instance ready":
			b.Steps = nil
			for _, m := range stepRe.FindAllStringSubmatch(attrs["timing"], -1) {
				s, err := strconv.ParseFloat(m[2], 64)
				if err != nil {
					return b, fmt.Errorf("boot log: step %s: bad seconds %q", m[1], m[2])
				}
				b.Steps = append(b.Steps, StepTime{Step: m[1], Seconds: s})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return b, fmt.Errorf("read boot log: %w", err)
	}
	if len(b.Steps) == 0 {
		return b, fmt.Errorf("boot log: no \"instance ready\" line with timings")
	}
	return b, nil
}

func parseAttrs(line string) map[string]string {
	out := map[string]string{}
	for _, m := range attrRe.FindAllStringSubmatch(line, -1) {
		v := m[2]
		if strings.HasPrefix(v, `"`) {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
		}
		if _, dup := out[m[1]]; !dup {
			out[m[1]] = v
		}
	}
	return out
}
