package cidata

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestCloudInitIsValidCloudConfig(t *testing.T) {
	ud, md := CloudInit("vmdock-default", "vmdock")
	if !strings.HasPrefix(string(ud), "#cloud-config\n") {
		t.Fatalf("user-data must start with #cloud-config: %q", ud[:20])
	}
	var cfg struct {
		Hostname   string   `yaml:"hostname"`
		Packages   []string `yaml:"packages"`
		WriteFiles []struct {
			Path    string `yaml:"path"`
			Content string `yaml:"content"`
		} `yaml:"write_files"`
		Runcmd [][]string `yaml:"runcmd"`
	}
	if err := yaml.Unmarshal(ud, &cfg); err != nil {
		t.Fatalf("user-data is not YAML: %v", err)
	}
	if cfg.Hostname != "vmdock" || len(cfg.WriteFiles) != 1 || len(cfg.Runcmd) != 3 {
		t.Fatalf("cloud-config = %+v", cfg)
	}
	unit := cfg.WriteFiles[0].Content
	for _, want := range []string{"LABEL=cidata", "--config /run/vmdock/cidata/agent.json", "WantedBy=multi-user.target"} {
		if !strings.Contains(unit, want) {
			t.Errorf("agent unit lacks %q:\n%s", want, unit)
		}
	}
	if !strings.Contains(strings.Join(cfg.Packages, " "), "docker.io") {
		t.Errorf("packages %v lack docker.io", cfg.Packages)
	}
	var meta map[string]string
	if err := yaml.Unmarshal(md, &meta); err != nil || meta["instance-id"] != "vmdock-default" {
		t.Fatalf("meta-data = %q (%v)", md, err)
	}
}
