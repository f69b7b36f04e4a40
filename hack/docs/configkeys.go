package main

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/vmdock/vmdock/vm/config"
)

// ConfigurationPage documents every configuration key.
const ConfigurationPage = "docs/configuration.md"

// configKeysMarker names the markers around the page's key table.
const configKeysMarker = "config-keys"

// configKeys walks t's YAML tags: leaves are the keys a user sets (nested
// as a.b, a list of objects as its elements' keys), parents are the
// objects that hold them, which the page may document as well.
func configKeys(t reflect.Type, prefix string, leaves, parents map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name) // yaml.v3's default
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		inner := f.Type
		for inner.Kind() == reflect.Pointer || inner.Kind() == reflect.Slice || inner.Kind() == reflect.Array {
			inner = inner.Elem()
		}
		switch {
		case strings.Contains(opts, "inline") && inner.Kind() == reflect.Struct:
			configKeys(inner, prefix, leaves, parents)
		case inner.Kind() == reflect.Struct:
			parents[key] = true
			configKeys(inner, key, leaves, parents)
		default:
			leaves[key] = true
		}
	}
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// documentedKeys reads the first cell of each row of the key table: every
// code span in it is a key.
func documentedKeys(table string) []string {
	var keys []string
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			keys = append(keys, m[1])
		}
	}
	return keys
}

// checkConfigKeys holds the page's key table to config.Config.
func checkConfigKeys(page string) []string {
	table, err := between(page, configKeysMarker)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v: put the markers around the table of configuration keys", ConfigurationPage, err)}
	}
	leaves, parents := map[string]bool{}, map[string]bool{}
	configKeys(reflect.TypeOf(config.Config{}), "", leaves, parents)
	seen := map[string]bool{}
	var problems []string
	for _, k := range documentedKeys(table) {
		seen[k] = true
		if !leaves[k] && !parents[k] {
			problems = append(problems, fmt.Sprintf("%s documents the key %q, which vm/config's Config has no YAML tag for: remove or rename its row", ConfigurationPage, k))
		}
	}
	var missing []string
	for k := range leaves {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		problems = append(problems, fmt.Sprintf("%s does not document the key %q of vm/config's Config: add a row for it (first cell `%s`) to the table between the %s markers", ConfigurationPage, k, k, configKeysMarker))
	}
	return problems
}
