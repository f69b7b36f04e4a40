// Package workflow runs a GitHub workflow job's steps on this machine as
// far as Linux can: each `run:` step from the YAML, in a clean environment
// holding only what a runner gives a job and what the job's own steps set
// up. No Go unless the job has a setup-go step (then /usr/local/go/bin is
// on PATH, as container-setup.sh links it); fakes of `gh` and `curl` (fakes/) where
// the job runs on a GitHub-hosted Ubuntu runner, whose images ship the
// real one; artifacts passed between jobs through a folder. A step the
// job would lack a tool for fails here as it would on GitHub.
package workflow

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// File is a workflow file, the parts the runner reads.
type File struct {
	Name string            `yaml:"name"`
	Env  map[string]string `yaml:"env"`
	Jobs map[string]*Job   `yaml:"jobs"`
}

// Job is one job.
type Job struct {
	Name      string            `yaml:"name"`
	Needs     any               `yaml:"needs"`
	RunsOn    string            `yaml:"runs-on"`
	Container *Container        `yaml:"container"`
	Env       map[string]string `yaml:"env"`
	Outputs   map[string]string `yaml:"outputs"`
	Strategy  struct {
		Matrix struct {
			Include []map[string]string `yaml:"include"`
		} `yaml:"matrix"`
	} `yaml:"strategy"`
	Steps []Step `yaml:"steps"`
}

// Container is a job's container.
type Container struct {
	Image string `yaml:"image"`
}

// Step is one step: a `run:` or a `uses:`.
type Step struct {
	ID   string            `yaml:"id"`
	Name string            `yaml:"name"`
	If   string            `yaml:"if"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	With map[string]string `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

// Load reads a workflow file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// JobIDs returns the workflow's job ids, sorted.
func (f *File) JobIDs() []string {
	ids := make([]string, 0, len(f.Jobs))
	for id := range f.Jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Matrix returns the job's matrix entries (one empty entry without a
// matrix).
func (j *Job) Matrix() []map[string]string {
	if len(j.Strategy.Matrix.Include) == 0 {
		return []map[string]string{{}}
	}
	return j.Strategy.Matrix.Include
}

// NeedsList returns the ids of the jobs j needs.
func (j *Job) NeedsList() []string {
	switch n := j.Needs.(type) {
	case string:
		return []string{n}
	case []any:
		var out []string
		for _, v := range n {
			out = append(out, fmt.Sprint(v))
		}
		return out
	}
	return nil
}

var exprRE = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// RunsOnLinux reports whether the job, with a matrix entry, runs on a
// GitHub-hosted Ubuntu runner (itself or in a container there).
func RunsOnLinux(runsOn string) bool {
	return strings.HasPrefix(runsOn, "ubuntu-")
}

// LinuxEntries returns the job's matrix entries that run on an Ubuntu
// runner.
func LinuxEntries(j *Job) []map[string]string {
	var out []map[string]string
	for _, m := range j.Matrix() {
		sc := &scope{matrix: m, current: "runs-on"}
		if on, err := sc.expand(j.RunsOn); err == nil && RunsOnLinux(on) {
			out = append(out, m)
		}
	}
	return out
}

// LocalGitHub is the github context of a run here: this repository's
// default name, tag as the ref, a token the fake gh accepts.
func LocalGitHub(tag string) map[string]string {
	return map[string]string{
		"repository": "vmdock/vmdock", "ref_name": tag, "token": "fake-token",
		"event.repository.default_branch": "main", "event.release.tag_name": tag,
		"event_name": "push",
	}
}
