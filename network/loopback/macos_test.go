package loopback

import (
	"bytes"
	"encoding/xml"
	"slices"
	"strings"
	"testing"
)

// A bare mask after `alias ADDR` is ifconfig's destination address: the
// mask must come with its netmask keyword.
func TestMacAddArgv(t *testing.T) {
	got := macAddArgv("10.254.254.254")
	want := []string{"ifconfig", "lo0", "alias", "10.254.254.254", "netmask", "255.255.255.255"}
	if !slices.Equal(got, want) {
		t.Errorf("macAddArgv = %q, want %q", got, want)
	}
}

// The boot-time daemon runs the very command `add` runs, by full path.
func TestMacPersistPlistProgramArguments(t *testing.T) {
	plist := macPersistPlist("10.254.254.254")
	got, label, err := plistArgs(plist)
	if err != nil {
		t.Fatalf("plist does not parse: %v\n%s", err, plist)
	}
	want := []string{"/sbin/ifconfig", "lo0", "alias", "10.254.254.254", "netmask", "255.255.255.255"}
	if !slices.Equal(got, want) {
		t.Errorf("ProgramArguments = %q, want %q", got, want)
	}
	if label != "org.vmdock.loopback-alias" {
		t.Errorf("Label = %q", label)
	}
}

// plistArgs reads the Label and ProgramArguments of a launchd plist.
func plistArgs(plist []byte) (args []string, label string, err error) {
	dec := xml.NewDecoder(bytes.NewReader(plist))
	dec.Strict = true
	var key string // the last <key> of the top dict
	inArgs := false
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return args, label, nil
			}
			return nil, "", err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			text.Reset()
			if tok.Name.Local == "array" && key == "ProgramArguments" {
				inArgs = true
			}
		case xml.CharData:
			text.Write(tok)
		case xml.EndElement:
			switch tok.Name.Local {
			case "key":
				key = text.String()
			case "array":
				inArgs = false
			case "string":
				if inArgs {
					args = append(args, text.String())
				} else if key == "Label" {
					label = text.String()
				}
			}
		}
	}
}
