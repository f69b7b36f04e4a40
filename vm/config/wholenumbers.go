package config

import (
	"fmt"
	"math"
	"strconv"

	"gopkg.in/yaml.v3"
)

// checkWholeNumbers refuses a fraction in the whole-number fields of the
// first YAML document in b. yaml.v3 truncates a float it decodes into an
// int, so `cpus: 4.5` would start 4 CPUs and every later message would
// speak of 4. Reading the same keys as floats (anchors and merges too)
// finds what was written.
func checkWholeNumbers(b []byte) error {
	var raw struct {
		CPUs *float64 `yaml:"cpus"`
		Disk *float64 `yaml:"disk"`
	}
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil // the config's own decoder reports what is wrong
	}
	for _, f := range []struct {
		key, unit string
		v         *float64
	}{{"cpus", "CPUs", raw.CPUs}, {"disk", "GiB", raw.Disk}} {
		if f.v != nil && (*f.v != math.Trunc(*f.v) || math.IsInf(*f.v, 0)) {
			return fmt.Errorf("%s: %s is not accepted; accepted: a whole number of %s", f.key, strconv.FormatFloat(*f.v, 'g', -1, 64), f.unit)
		}
	}
	return nil
}
