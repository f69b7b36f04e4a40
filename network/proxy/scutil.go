package proxy

import (
	"bufio"
	"fmt"
	"strings"
)

// ParseScutil reads `scutil --proxy` output (macOS's system proxy
// settings): the HTTP and HTTPS proxies when enabled, the exceptions list
// as NoProxy, and the PAC URL when auto-config is on.
func ParseScutil(out string) (Settings, string, error) {
	vals := map[string]string{}
	var exceptions []string
	inExceptions := false
	sc := bufio.NewScanner(strings.NewReader(out))
	seenDict := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "<dictionary>") {
			seenDict = true
			continue
		}
		if inExceptions {
			if line == "}" {
				inExceptions = false
				continue
			}
			if _, v, ok := strings.Cut(line, " : "); ok {
				exceptions = append(exceptions, strings.TrimSpace(v))
			}
			continue
		}
		k, v, ok := strings.Cut(line, " : ")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "ExceptionsList" && strings.HasPrefix(v, "<array>") {
			inExceptions = true
			continue
		}
		vals[k] = v
	}
	if !seenDict {
		return Settings{}, "", fmt.Errorf("scutil --proxy printed no <dictionary>: %q", firstLine(out))
	}
	proxyURL := func(prefix string) string {
		if vals[prefix+"Enable"] != "1" || vals[prefix+"Proxy"] == "" {
			return ""
		}
		u := "http://" + vals[prefix+"Proxy"]
		if p := vals[prefix+"Port"]; p != "" {
			u += ":" + p
		}
		return u
	}
	s := Settings{HTTP: proxyURL("HTTP"), HTTPS: proxyURL("HTTPS")}
	if s.HTTP != "" || s.HTTPS != "" {
		if vals["ExcludeSimpleHostnames"] == "1" {
			exceptions = append(exceptions, "localhost")
		}
		s.NoProxy = strings.Join(exceptions, ",")
	}
	pac := ""
	if vals["ProxyAutoConfigEnable"] == "1" {
		pac = vals["ProxyAutoConfigURLString"]
		if pac == "" {
			pac = "(no URL)"
		}
	}
	return s, pac, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
