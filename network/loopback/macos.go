package loopback

import (
	"bytes"
	"encoding/xml"
)

// The macOS alias commands are built here, in a file every OS compiles,
// so that tests on Linux check them; loopback_darwin.go runs them.

// macAddArgv puts ip on lo0 as a host alias. The mask needs its keyword:
// after `alias ADDR`, ifconfig reads a bare address as the destination.
func macAddArgv(ip string) []string {
	return []string{"ifconfig", "lo0", "alias", ip, "netmask", "255.255.255.255"}
}

// macIfconfig is ifconfig's full path: launchd runs ProgramArguments
// without a shell's PATH.
const macIfconfig = "/sbin/ifconfig"

// macPersistPlist is the launchd daemon that runs macAddArgv at every
// boot.
func macPersistPlist(ip string) []byte {
	var args bytes.Buffer
	for i, a := range macAddArgv(ip) {
		if i == 0 {
			a = macIfconfig
		}
		args.WriteString("\t\t<string>")
		xml.EscapeText(&args, []byte(a)) // never fails on a bytes.Buffer
		args.WriteString("</string>\n")
	}
	// An XML comment may not hold "--", so the flag is not named in it.
	return []byte(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Installed by vmdock loopback-alias add, with persist; removed by vmdock loopback-alias remove. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>org.vmdock.loopback-alias</string>
	<key>ProgramArguments</key>
	<array>
` + args.String() + `	</array>
	<key>RunAtLoad</key>
	<true/>
</dict>
</plist>
`)
}
