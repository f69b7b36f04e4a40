package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestIdleYAMLJSONAndValidation(t *testing.T) {
	var c struct {
		Idle Duration `yaml:"idle"`
	}
	for in, want := range map[string]Duration{"30s": Duration(30 * time.Second), "10m": DefaultIdle, "0": 0, "1h30m": Duration(90 * time.Minute)} {
		if err := yaml.Unmarshal([]byte("idle: "+in), &c); err != nil || c.Idle != want {
			t.Errorf("idle: %s read as %v, %v; want %v", in, c.Idle, err, want)
		}
	}
	for _, in := range []string{"10", "ten minutes", "5x"} {
		err := yaml.Unmarshal([]byte("idle: "+in), &c)
		if err == nil || !strings.Contains(err.Error(), `"`+in+`" is not a duration; accepted: a number with a unit`) {
			t.Errorf("idle: %s: %v", in, err)
		}
	}
	out, _ := yaml.Marshal(struct {
		Idle Duration `yaml:"idle"`
	}{Duration(30 * time.Second)})
	if string(out) != "idle: 30s\n" {
		t.Errorf("YAML form %q", out)
	}
	j, _ := json.Marshal(struct {
		Idle Duration `json:"idle"`
	}{0})
	if string(j) != `{"idle":"0"}` {
		t.Errorf("JSON form %s", j)
	}
	var back struct {
		Idle Duration `json:"idle"`
	}
	if err := json.Unmarshal([]byte(`{"idle":"2m"}`), &back); err != nil || back.Idle != Duration(2*time.Minute) {
		t.Errorf("JSON read: %v %v", back.Idle, err)
	}

	for d, ok := range map[Duration]bool{0: true, MinIdle: true, DefaultIdle: true, Duration(9 * time.Second): false, -1: false} {
		if err := CheckIdle(d); (err == nil) != ok {
			t.Errorf("CheckIdle(%s) = %v", d, err)
		} else if err != nil && !strings.Contains(err.Error(), "accepted: 0 (never pause) or 10s and up") {
			t.Errorf("CheckIdle(%s) says %v", d, err)
		}
	}
	c2 := Default(Host{OS: "linux", Arch: "amd64", CPUs: 2})
	if c2.Idle != DefaultIdle {
		t.Errorf("default idle %s", c2.Idle)
	}
	c2.Idle = Duration(5 * time.Second)
	if err := c2.ValidateOn(Host{OS: "linux", Arch: "amd64", CPUs: 2}); err == nil || !strings.Contains(err.Error(), "idle: 5s is not accepted") {
		t.Errorf("validation of idle 5s: %v", err)
	}
}
