package migrate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
)

// sameContainer reports whether the target's container existing is the
// one spec, a source container, makes. One this run's record says
// migrate created (its ID) is compared by what migrate asked for then
// and would ask for now, never by what the target engine filled in: an
// engine of another version fills in other defaults (restart policy "no"
// for none, empty lists for none, "bridge" for "default"). Any other
// container is compared by what was asked of the engine, with those
// defaults made alike.
func (r *run) sameContainer(existing containerInspect, spec ContainerSpec) bool {
	if e, ok := r.record.container(spec.Name); ok && e.ID == existing.ID {
		return e.Spec == specDigest(spec)
	}
	return reflect.DeepEqual(comparable(SpecOf(existing)), comparable(spec))
}

// specDigest names what migrate asks of the target for spec.
func specDigest(spec ContainerSpec) string {
	b, _ := json.Marshal(comparable(spec)) // maps of JSON values always encode
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// comparable is spec as far as it was asked of the engine, with what an
// engine fills in by itself left out and its defaults made alike.
func comparable(s ContainerSpec) ContainerSpec {
	keep := func(m map[string]any, keys ...string) map[string]any {
		out := map[string]any{}
		for _, k := range keys {
			if v := withoutEmpty(m[k]); v != nil {
				out[k] = v
			}
		}
		return out
	}
	s.Config = keep(s.Config, "Image", "Cmd", "Entrypoint", "Env", "Labels", "ExposedPorts", "User", "WorkingDir")
	s.HostConfig = keep(s.HostConfig, "PortBindings", "RestartPolicy", "Binds", "Mounts", "NetworkMode")
	if s.HostConfig["NetworkMode"] == "default" {
		s.HostConfig["NetworkMode"] = "bridge"
	}
	if rp, ok := s.HostConfig["RestartPolicy"].(map[string]any); ok && rp["Name"] == "no" {
		delete(rp, "Name")
		if len(rp) == 0 {
			delete(s.HostConfig, "RestartPolicy")
		}
	}
	return s
}

// withoutEmpty is a JSON value with empty strings, zeros, false, empty
// lists and maps left out of maps, and nil when nothing is left: one
// engine answers null where another answers [] or {}.
func withoutEmpty(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if e := withoutEmpty(e); e != nil {
				out[k] = e
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(x) == 0 {
			return nil
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutEmpty(e)
		}
		return out
	case string:
		if x == "" {
			return nil
		}
	case float64:
		if x == 0 {
			return nil
		}
	case bool:
		if !x {
			return nil
		}
	}
	return v
}
