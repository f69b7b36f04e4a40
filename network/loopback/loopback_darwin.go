package loopback

import "strings"

// persistPath is the launchd daemon that re-adds the alias at boot.
const persistPath = "/Library/LaunchDaemons/org.vmdock.loopback-alias.plist"

func addArgv(ip string) []string { return macAddArgv(ip) }
func delArgv(ip string) []string { return []string{"ifconfig", "lo0", "-alias", ip} }
func showArgv() []string         { return []string{"ifconfig", "lo0", "inet"} }

// hasAlias finds ip in `ifconfig lo0` output ("inet 10.254.254.254 netmask ...").
func hasAlias(out, ip string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" && f[i+1] == ip {
				return true
			}
		}
	}
	return false
}

func persistContent(ip string) []byte { return macPersistPlist(ip) }

func enableArgvs(file string) [][]string {
	return [][]string{{"launchctl", "bootstrap", "system", file}}
}

func disableArgvs(file string) [][]string {
	return [][]string{{"launchctl", "bootout", "system", file}}
}

func afterRemoveArgvs() [][]string { return nil }
