package config

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// DefaultIdle is how long an unused VM runs before it pauses;
// MinIdle is the shortest accepted, so a pause is never a surprise in
// the middle of one's work.
const (
	DefaultIdle = Duration(10 * time.Minute)
	MinIdle     = Duration(10 * time.Second)
)

// Duration is a time.Duration that the YAML and JSON forms write as Go's
// duration text ("10m", "30s", "0").
type Duration time.Duration

// ParseDuration reads what a user wrote for a duration: Go's text with a
// unit, or 0.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; accepted: a number with a unit (30s, 10m, 1h) or 0", s)
	}
	return Duration(d), nil
}

func (d Duration) String() string {
	if d == 0 {
		return "0"
	}
	return time.Duration(d).String()
}

func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = v
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration %s: %w", b, err)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// CheckIdle says whether d is accepted as the idle period: 0 (never
// pause) or at least MinIdle.
func CheckIdle(d Duration) error {
	if d < 0 || (d > 0 && d < MinIdle) {
		return fmt.Errorf("idle: %s is not accepted; accepted: 0 (never pause) or %s and up", d, MinIdle)
	}
	return nil
}
