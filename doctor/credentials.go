package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// dockerConfigFile is the docker CLI's config.json: in $DOCKER_CONFIG when
// set, else ~/.docker.
func dockerConfigFile(f Facts) string {
	if d := f.Getenv("DOCKER_CONFIG"); d != "" {
		return filepath.Join(d, "config.json")
	}
	return filepath.Join(f.Getenv("HOME"), ".docker", "config.json")
}

// dockerCredentials is the part of config.json that names credential
// helpers the docker CLI runs on every pull and login.
type dockerCredentials struct {
	CredsStore  string            `json:"credsStore"`
	CredHelpers map[string]string `json:"credHelpers"`
}

// checkDockerCredentials: a credsStore or credHelpers entry whose
// docker-credential-<name> program is gone makes the docker CLI fail
// before it talks to any engine ("desktop" is what Docker Desktop leaves
// behind once uninstalled, and then `docker run hello-world` fails).
func checkDockerCredentials(_ context.Context, f Facts) Result {
	if usesContainerd(f) {
		return ok("not used: this instance runs containerd (`vmdock nerdctl`)")
	}
	file := dockerConfigFile(f)
	b, err := f.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return ok("no %s: no credential helper configured", file)
	}
	if err != nil {
		return warn("make it readable, or remove it", "%s: %v", file, err)
	}
	var cfg dockerCredentials
	if err := json.Unmarshal(b, &cfg); err != nil {
		return warn(fmt.Sprintf("fix or remove %s: the docker CLI refuses it too", file), "%s is not valid JSON: %v", file, err)
	}
	if cfg.CredsStore != "" && !f.hasProgram(credentialHelper(cfg.CredsStore)) {
		return fail(credentialFix(f, file, `"credsStore"`, cfg.CredsStore),
			"%s: credsStore %q, but %s is not on PATH: every docker pull and login fails", file, cfg.CredsStore, credentialHelper(cfg.CredsStore))
	}
	if missing := missingHelpers(f, cfg.CredHelpers); len(missing) > 0 {
		registries := strings.Join(missing, ", ")
		name := cfg.CredHelpers[missing[0]]
		return warn(credentialFix(f, file, fmt.Sprintf("the credHelpers entries for %s", registries), name),
			"%s: credHelpers for %s name %s, which is not on PATH: pulls from there fail", file, registries, credentialHelper(name))
	}
	if cfg.CredsStore != "" {
		return ok("credsStore %s (%s found)", cfg.CredsStore, credentialHelper(cfg.CredsStore))
	}
	return ok("every credential helper in %s is on PATH", file)
}

func credentialHelper(name string) string { return "docker-credential-" + name }

func (f Facts) hasProgram(name string) bool {
	_, err := f.LookPath(name)
	return err == nil
}

// missingHelpers lists, sorted, the registries whose helper is not on PATH.
func missingHelpers(f Facts, helpers map[string]string) []string {
	var missing []string
	for registry, name := range helpers {
		if !f.hasProgram(credentialHelper(name)) {
			missing = append(missing, registry)
		}
	}
	sort.Strings(missing)
	return missing
}

// credentialFix says both ways out: drop the key, or install the helper
// (on a Mac, osxkeychain comes from Homebrew).
func credentialFix(f Facts, file, key, name string) string {
	install := "install " + credentialHelper(name)
	if name == "osxkeychain" && f.Host.OS == osDarwin {
		install = "`brew install docker-credential-helper`"
	}
	return fmt.Sprintf("remove %s from %s (docker then keeps logins in that file), or %s", key, file, install)
}
