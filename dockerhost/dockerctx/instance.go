package dockerctx

import "github.com/vmdock/vmdock/vm/store"

// Of is an instance's docker context, with the file that remembers the
// context it replaced.
func Of(inst *store.Instance) Profile {
	return Profile{Name: inst.Name, Socket: inst.DockerSocketPath(), StatePath: inst.StatePath()}
}
