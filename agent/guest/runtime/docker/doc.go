// Package docker starts the docker runtime in the guest: daemon.json with
// vmdock's settings over the image's, containerd and dockerd, and waits
// until the engine answers.
package docker
