package workflow

import (
	"fmt"
	"strings"
)

// scope is what a job's expressions may name.
type scope struct {
	env     map[string]string
	matrix  map[string]string
	github  map[string]string // repository, ref_name, token, event.*...
	inputs  map[string]string
	runner  map[string]string
	needs   map[string]map[string]string // job id -> its outputs
	steps   map[string]map[string]string // step id -> its outputs
	current string                       // what is being expanded, for errors
}

// expand replaces every ${{ expr }} in s. An expression naming something
// the runner does not model is an error: the check grows with the
// workflows instead of guessing.
func (sc *scope) expand(s string) (string, error) {
	var firstErr error
	out := exprRE.ReplaceAllStringFunc(s, func(m string) string {
		v, err := sc.eval(exprRE.FindStringSubmatch(m)[1])
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s: %w", sc.current, err)
		}
		return v
	})
	return out, firstErr
}

// eval takes `a || b || 'literal'`: the first non-empty term.
func (sc *scope) eval(expr string) (string, error) {
	for _, term := range strings.Split(expr, "||") {
		term = strings.TrimSpace(term)
		if len(term) >= 2 && term[0] == '\'' && term[len(term)-1] == '\'' {
			return term[1 : len(term)-1], nil
		}
		v, err := sc.lookup(term)
		if err != nil {
			return "", err
		}
		if v != "" {
			return v, nil
		}
	}
	return "", nil
}

func (sc *scope) lookup(name string) (string, error) {
	head, rest, _ := strings.Cut(name, ".")
	flat := map[string]map[string]string{"env": sc.env, "matrix": sc.matrix, "github": sc.github, "inputs": sc.inputs, "runner": sc.runner}
	if m, ok := flat[head]; ok {
		v, ok := m[rest]
		if !ok && head != "env" && head != "inputs" {
			return "", fmt.Errorf("${{ %s }}: not modelled by hack/ci/workflow", name)
		}
		return v, nil
	}
	if head == "needs" || head == "steps" {
		id, out, ok := strings.Cut(rest, ".outputs.")
		if !ok {
			return "", fmt.Errorf("${{ %s }}: only %s.<id>.outputs.<name> is modelled", name, head)
		}
		src := sc.needs
		if head == "steps" {
			src = sc.steps
		}
		return src[id][out], nil
	}
	return "", fmt.Errorf("${{ %s }}: not modelled by hack/ci/workflow", name)
}
