package cidata

import "fmt"

// CloudInit returns the NoCloud user-data and meta-data that turn a stock
// cloud image (Debian genericcloud) into a vmdock guest on its first boot:
// install docker.io, keep dockerd off until the agent has mounted the data
// disk, and run the agent from this boot disk on every boot. Our own image
// has no cloud-init and ignores both files.
func CloudInit(instanceID, hostname string) (userData, metaData []byte) {
	metaData = []byte(fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", instanceID, hostname))
	userData = []byte(fmt.Sprintf(`#cloud-config
hostname: %s
package_update: true
packages: [docker.io, containerd, runc, iptables, qemu-user-static, binfmt-support]
write_files:
  - path: /etc/systemd/system/vmdock-agent.service
    content: |
      [Unit]
      Description=vmdock guest agent
      After=local-fs.target
      [Service]
      ExecStartPre=/bin/sh -c 'mkdir -p /run/vmdock/cidata; mountpoint -q /run/vmdock/cidata || mount -o ro LABEL=%s /run/vmdock/cidata; install -m 0755 /run/vmdock/cidata/vmdock-agent /usr/local/bin/vmdock-agent'
      ExecStart=/usr/local/bin/vmdock-agent --config /run/vmdock/cidata/agent.json
      Restart=always
      RestartSec=2
      [Install]
      WantedBy=multi-user.target
runcmd:
  - [systemctl, disable, --now, docker.service, docker.socket, containerd.service]
  - [systemctl, daemon-reload]
  - [systemctl, enable, --now, vmdock-agent.service]
`, hostname, Label))
	return userData, metaData
}
