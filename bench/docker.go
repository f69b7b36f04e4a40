package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// dockerAPI is the few Docker Engine API calls the domains section makes
// through the instance's docker socket on the host (the guest image has
// dockerd but no docker CLI). Creating a container never pulls: a missing
// image is an error, never a registry request.
type dockerAPI struct{ client *http.Client }

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
	if err := d.call(ctx, http.MethodPost, "/containers/create?name="+url.QueryEscape(name), body, &created, http.StatusCreated); err != nil {
		return "", err
	}
	if err := d.call(ctx, http.MethodPost, "/containers/"+created.Id+"/start", nil, nil, http.StatusNoContent); err != nil {
		_ = d.remove(context.WithoutCancel(ctx), created.Id)
		return "", err
	}
	return created.Id, nil
}

// remove force-removes a container; one that is not there is no error.
func (d dockerAPI) remove(ctx context.Context, nameOrID string) error {
	err := d.call(ctx, http.MethodDelete, "/containers/"+url.PathEscape(nameOrID)+"?force=1", nil, nil, http.StatusNoContent)
	if err != nil && strings.Contains(err.Error(), " 404 ") {
		return nil
	}
	return err
}

func (d dockerAPI) call(ctx context.Context, method, path string, in, out any, want int) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return fmt.Errorf("docker %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != want {
		var e struct{ Message string }
		if json.Unmarshal(b, &e) == nil && e.Message != "" {
			b = []byte(e.Message)
		}
		return fmt.Errorf("docker %s %s: %s %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("docker %s %s: %w", method, path, err)
		}
	}
	return nil
}
