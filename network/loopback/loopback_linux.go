package loopback

import (
	"fmt"
	"strings"
)

// persistPath is the systemd unit that re-adds the alias at boot.
const persistPath = "/etc/systemd/system/vmdock-loopback-alias.service"

const unitName = "vmdock-loopback-alias.service"

func addArgv(ip string) []string { return []string{"ip", "addr", "add", ip + "/32", "dev", "lo"} }
func delArgv(ip string) []string { return []string{"ip", "addr", "del", ip + "/32", "dev", "lo"} }
func showArgv() []string         { return []string{"ip", "-o", "-4", "addr", "show", "dev", "lo"} }

// hasAlias finds ip in `ip -o -4 addr show` output ("inet 10.254.254.254/32 ...").
func hasAlias(out, ip string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" && strings.SplitN(f[i+1], "/", 2)[0] == ip {
				return true
			}
		}
	}
	return false
}

// persistContent is a oneshot unit; `ip addr replace` keeps it harmless
// when the alias is already there. /sbin/ip exists on merged-/usr and
// classic layouts alike.
func persistContent(ip string) []byte {
	return []byte(fmt.Sprintf(`# Installed by vmdock (vmdock loopback-alias add --persist); removed by
# vmdock loopback-alias remove.
[Unit]
Description=vmdock loopback alias %[1]s
DefaultDependencies=no
Before=network-pre.target
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/sbin/ip addr replace %[1]s/32 dev lo

[Install]
WantedBy=multi-user.target
`, ip))
}

func enableArgvs(file string) [][]string {
	return [][]string{{"systemctl", "daemon-reload"}, {"systemctl", "enable", unitName}}
}

func disableArgvs(file string) [][]string {
	return [][]string{{"systemctl", "disable", unitName}}
}

func afterRemoveArgvs() [][]string { return [][]string{{"systemctl", "daemon-reload"}} }
