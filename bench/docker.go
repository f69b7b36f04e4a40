package bench

import (
	"context"
	"fmt"
	"net/url"

	"github.com/vmdock/vmdock/dockerhost/engineapi"
)

// dockerAPI is the few Docker Engine API calls the domains section makes
// through the instance's docker socket on the host (the guest image has
// dockerd but no docker CLI). Creating a container never pulls: a missing
// image is an error, never a registry request.
type dockerAPI struct{ api *engineapi.Client }

// runContainer creates and starts a container of image named name with
// labels, its TCP port published on the guest's hostPort (all the
// guest's addresses), and returns its ID.
func (d dockerAPI) runContainer(ctx context.Context, name, image string, labels map[string]string, port, hostPort int) (string, error) {
	p := fmt.Sprintf("%d/tcp", port)
	body := map[string]any{
		"Image":        image,
		"Labels":       labels,
		"ExposedPorts": map[string]any{p: map[string]any{}},
		"HostConfig": map[string]any{
			"PortBindings": map[string]any{p: []map[string]string{{"HostPort": fmt.Sprint(hostPort)}}},
		},
	}
	var created struct{ Id string } //nolint:revive // the API's spelling
	if err := d.api.Post(ctx, "/containers/create", url.Values{"name": {name}}, body, &created); err != nil {
		return "", fmt.Errorf("docker %w", err)
	}
	if err := d.api.Post(ctx, "/containers/"+url.PathEscape(created.Id)+"/start", nil, nil, nil); err != nil {
		_ = d.remove(context.WithoutCancel(ctx), created.Id)
		return "", fmt.Errorf("docker %w", err)
	}
	return created.Id, nil
}

// remove force-removes a container; one that is not there is no error.
func (d dockerAPI) remove(ctx context.Context, nameOrID string) error {
	err := d.api.Delete(ctx, "/containers/"+url.PathEscape(nameOrID), url.Values{"force": {"1"}})
	if err != nil && !engineapi.IsNotFound(err) {
		return fmt.Errorf("docker %w", err)
	}
	return nil
}
