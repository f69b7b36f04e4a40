package workflow

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The PATH a job starts with: a Debian container's default, which the
// Ubuntu runner's also holds (the runner's own extras, such as its cached
// toolchains, are never on PATH until a setup action puts them there).
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// goCacheVars are passed to a job that sets Go up: where setup-go's
// toolchain finds its caches (a runner's cache restore, here the
// machine's own warm caches).
var goCacheVars = []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY", "GOFLAGS", "GONOSUMDB", "GOPRIVATE"}

// Runner runs workflow jobs here.
type Runner struct {
	Repo      string            // the repository under test (its HEAD, uncommitted changes included)
	InPlace   bool              // actions/checkout uses Repo itself, not a fresh clone
	Artifacts string            // artifacts by name: Artifacts/<name>/<files>
	Temp      string            // scratch: workspaces, RUNNER_TEMP, the fake origin
	FakeBin   string            // folder of fakes put on an Ubuntu runner's PATH (gh)
	GoRoot    string            // what setup-go provides (/usr/local/go)
	GitHub    map[string]string // github.* (repository, ref_name, token, event.*)
	Inputs    map[string]string // inputs.* of a workflow_dispatch
	Log       io.Writer
	outputs   map[string]map[string]string
}

// job is one job's run: its workspace, environment and expressions.
type job struct {
	r         *Runner
	id        string
	workspace string
	path      []string // PATH, first entry first
	env       map[string]string
	sc        *scope
	goSetUp   bool // a setup-go step ran
}

// RunJob runs job id of f for one matrix entry. A job that runs on no
// Ubuntu runner is an error: only Linux jobs run here.
func (r *Runner) RunJob(f *File, id string, matrix map[string]string) error {
	j, ok := f.Jobs[id]
	if !ok {
		return fmt.Errorf("workflow %q has no job %q (it has %s)", f.Name, id, strings.Join(f.JobIDs(), ", "))
	}
	jb, err := r.newJob(f, id, j, matrix)
	if err != nil {
		return err
	}
	runsOn, err := jb.sc.expand(j.RunsOn)
	if err != nil {
		return err
	}
	if !RunsOnLinux(runsOn) {
		return fmt.Errorf("job %s runs on %s: only Ubuntu runners' jobs run here", id, runsOn)
	}
	if j.Container == nil {
		// A GitHub-hosted Ubuntu runner ships gh; here it is the fake.
		jb.path = append([]string{r.FakeBin}, jb.path...)
	}
	fmt.Fprintf(r.Log, "== %s / %s %v on %s (container %v)\n", f.Name, id, matrix, runsOn, j.Container != nil)
	for i, st := range j.Steps {
		if err := jb.step(i, st); err != nil {
			return fmt.Errorf("%s / %s %v, step %d (%s): %w", f.Name, id, matrix, i+1, st.label(), err)
		}
	}
	outs := map[string]string{}
	for k, v := range j.Outputs {
		jb.sc.current = "outputs." + k
		if outs[k], err = jb.sc.expand(v); err != nil {
			return err
		}
	}
	if r.outputs == nil {
		r.outputs = map[string]map[string]string{}
	}
	r.outputs[id] = outs
	return nil
}

func (st Step) label() string {
	switch {
	case st.Name != "":
		return st.Name
	case st.Uses != "":
		return st.Uses
	}
	line, _, _ := strings.Cut(strings.TrimSpace(st.Run), "\n")
	return line
}

func (r *Runner) newJob(f *File, id string, j *Job, matrix map[string]string) (*job, error) {
	ws := filepath.Join(r.Temp, "work", id)
	if r.InPlace {
		ws = r.Repo
	} else if err := os.MkdirAll(ws, 0o755); err != nil {
		return nil, err
	}
	runnerTemp := filepath.Join(r.Temp, "runner-temp", id)
	if err := os.MkdirAll(runnerTemp, 0o755); err != nil {
		return nil, err
	}
	needs := map[string]map[string]string{}
	for _, n := range j.NeedsList() {
		needs[n] = r.outputs[n]
	}
	jb := &job{r: r, id: id, workspace: ws, path: strings.Split(basePath, ":"), env: map[string]string{}}
	jb.sc = &scope{env: jb.env, matrix: matrix, github: r.GitHub, inputs: r.Inputs,
		runner: map[string]string{"temp": runnerTemp, "os": "Linux"}, needs: needs, steps: map[string]map[string]string{}}
	for _, layer := range []map[string]string{f.Env, j.Env} {
		if err := jb.addEnv(layer, jb.env); err != nil {
			return nil, err
		}
	}
	return jb, nil
}

// addEnv expands each value of layer into dst.
func (jb *job) addEnv(layer, dst map[string]string) error {
	for k, v := range layer {
		jb.sc.current = "env." + k
		x, err := jb.sc.expand(v)
		if err != nil {
			return err
		}
		dst[k] = x
	}
	return nil
}

func (jb *job) step(i int, st Step) error {
	switch st.If {
	case "":
	case "failure()":
		// Steps run until the first failure, which ends the job here.
		return nil
	default:
		return fmt.Errorf("if: %s: not modelled by hack/ci/workflow", st.If)
	}
	jb.sc.current = fmt.Sprintf("step %d", i+1)
	with := map[string]string{}
	for k, v := range st.With {
		x, err := jb.sc.expand(v)
		if err != nil {
			return err
		}
		with[k] = x
	}
	if st.Uses != "" {
		return jb.uses(st.Uses, with)
	}
	stepEnv := map[string]string{}
	for k, v := range jb.env {
		stepEnv[k] = v
	}
	if err := jb.addEnv(st.Env, stepEnv); err != nil {
		return err
	}
	jb.sc.current = fmt.Sprintf("step %d", i+1)
	script, err := jb.sc.expand(st.Run)
	if err != nil {
		return err
	}
	return jb.run(st.ID, script, stepEnv)
}

// run runs script as GitHub runs a Linux `run:` step (bash --noprofile
// --norc -eo pipefail), in the workspace, with the job's environment and
// nothing of this process's but HOME.
func (jb *job) run(id, script string, stepEnv map[string]string) error {
	files := map[string]string{}
	for _, name := range []string{"GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_ENV"} {
		f, err := os.CreateTemp(jb.r.Temp, strings.ToLower(name))
		if err != nil {
			return err
		}
		f.Close()
		files[name] = f.Name()
	}
	scriptFile := filepath.Join(jb.r.Temp, "step.sh")
	if err := os.WriteFile(scriptFile, []byte(script), 0o644); err != nil {
		return err
	}
	cmd := exec.Command("/bin/bash", "--noprofile", "--norc", "-eo", "pipefail", scriptFile)
	if !jb.goSetUp {
		cmd = hideGo(jb.r.GoRoot, cmd)
	}
	cmd.Dir, cmd.Stdout, cmd.Stderr = jb.workspace, jb.r.Log, jb.r.Log
	cmd.Env = jb.environ(stepEnv, files)
	fmt.Fprintf(jb.r.Log, "-- run: %s\n", strings.TrimSpace(script))
	if err := cmd.Run(); err != nil {
		return err
	}
	return jb.readCommandFiles(id, files)
}

func (jb *job) environ(stepEnv, files map[string]string) []string {
	env := []string{
		"PATH=" + strings.Join(jb.path, ":"),
		"HOME=" + os.Getenv("HOME"),
		"CI=true", "GITHUB_ACTIONS=true",
		"GITHUB_WORKSPACE=" + jb.workspace,
		"GITHUB_REPOSITORY=" + jb.r.GitHub["repository"],
		"GITHUB_REF_NAME=" + jb.r.GitHub["ref_name"],
		"RUNNER_TEMP=" + jb.sc.runner["temp"],
	}
	for k, v := range files {
		env = append(env, k+"="+v)
	}
	for k, v := range stepEnv {
		env = append(env, k+"="+v)
	}
	return env
}

// readCommandFiles applies what a step wrote to GITHUB_OUTPUT, GITHUB_PATH
// and GITHUB_ENV (name=value lines).
func (jb *job) readCommandFiles(id string, files map[string]string) error {
	outs := map[string]string{}
	for name, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			switch name {
			case "GITHUB_PATH":
				if line != "" {
					jb.path = append([]string{line}, jb.path...)
				}
			case "GITHUB_OUTPUT", "GITHUB_ENV":
				k, v, ok := strings.Cut(line, "=")
				if !ok {
					f.Close()
					return fmt.Errorf("%s: line %q is not name=value (the multi-line form is not modelled)", name, line)
				}
				if name == "GITHUB_ENV" {
					jb.env[k] = v
				} else {
					outs[k] = v
				}
			}
		}
		f.Close()
		os.Remove(p)
	}
	if id != "" {
		jb.sc.steps[id] = outs
	}
	return nil
}

// hideGo runs cmd where GoRoot, which this machine has and a runner's
// fresh container does not, is an empty folder: scripts that look there
// directly (not only on PATH) find no Go either. It needs root (a mount
// namespace of its own); a machine without GoRoot needs nothing.
func hideGo(goRoot string, cmd *exec.Cmd) *exec.Cmd {
	if _, err := os.Stat(goRoot); err != nil {
		return cmd
	}
	args := append([]string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c",
		`mount -t tmpfs -o size=1m,mode=0755 none "$0" && exec "$@"`, goRoot}, cmd.Args...)
	hidden := exec.Command("unshare", args...)
	hidden.Dir, hidden.Stdout, hidden.Stderr = cmd.Dir, cmd.Stdout, cmd.Stderr
	return hidden
}
