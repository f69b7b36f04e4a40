// Command wfrun runs GitHub workflow jobs on this machine, as
// hack/ci/workflow models a runner: each `run:` step in a clean
// environment with only what the job sets up. .ci/run builds its image
// through ci.yml's image job this way (-in-place: the checkout is this
// one, so the image lands in hack/image/out for the e2e phases).
//
//	go run ./hack/ci/wfrun [-in-place] -workflow .github/workflows/ci.yml -job linux-image [-matrix arch=amd64]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmdock/vmdock/hack/ci/workflow"
)

func main() {
	wf := flag.String("workflow", "", "the workflow file")
	jobID := flag.String("job", "", "the job to run")
	matrix := flag.String("matrix", "", "the matrix entry, k=v[,k=v] (default: the job's only Ubuntu entry)")
	inPlace := flag.Bool("in-place", false, "run in this checkout instead of a fresh clone")
	tag := flag.String("ref-name", "v0.0.0-local", "github.ref_name")
	flag.Parse()
	if err := run(*wf, *jobID, *matrix, *tag, *inPlace); err != nil {
		fmt.Fprintln(os.Stderr, "wfrun:", err)
		os.Exit(1)
	}
}

func run(wf, jobID, matrix, tag string, inPlace bool) error {
	if wf == "" || jobID == "" {
		return fmt.Errorf("-workflow and -job are required")
	}
	f, err := workflow.Load(wf)
	if err != nil {
		return err
	}
	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "wfrun-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	r := &workflow.Runner{
		Repo: repo, InPlace: inPlace, Artifacts: filepath.Join(tmp, "artifacts"), Temp: tmp,
		FakeBin: filepath.Join(repo, "hack", "ci", "workflow", "fakes"), GoRoot: "/usr/local/go",
		GitHub: workflow.LocalGitHub(tag), Log: os.Stdout,
	}
	entry, err := pickMatrix(f, jobID, matrix)
	if err != nil {
		return err
	}
	return r.RunJob(f, jobID, entry)
}

// pickMatrix parses k=v[,k=v], or picks the job's one Ubuntu entry.
func pickMatrix(f *workflow.File, jobID, matrix string) (map[string]string, error) {
	if matrix != "" {
		m := map[string]string{}
		for _, kv := range strings.Split(matrix, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("-matrix %q: want k=v[,k=v]", matrix)
			}
			m[k] = v
		}
		return m, nil
	}
	j, ok := f.Jobs[jobID]
	if !ok {
		return nil, fmt.Errorf("no job %q in %s", jobID, f.Name)
	}
	entries := workflow.LinuxEntries(j)
	if len(entries) != 1 {
		return nil, fmt.Errorf("job %s has %d Ubuntu matrix entries: name one with -matrix", jobID, len(entries))
	}
	return entries[0], nil
}
