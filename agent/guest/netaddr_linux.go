package guest

import (
	"bufio"
	"net"
	"os"
	"strings"
)

// defaultRouteInterface names the interface of the IPv4 default route in
// a /proc/net/route table ("" for none). Container bridges never hold it.
func defaultRouteInterface(table string) string {
	sc := bufio.NewScanner(strings.NewReader(table))
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if len(f) >= 8 && f[1] == "00000000" && f[7] == "00000000" {
			return f[0]
		}
	}
	return ""
}

// networkAddrs are the IPv4 addresses of the default route's interface.
func networkAddrs() []string {
	table, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil
	}
	name := defaultRouteInterface(string(table))
	if name == "" {
		return nil
	}
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return nil
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			out = append(out, n.IP.String())
		}
	}
	return out
}
