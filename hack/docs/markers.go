package main

import (
	"fmt"
	"strings"
)

// The generated and checked parts of a page sit between two HTML comments
// (invisible on GitHub): <!-- name:begin --> and <!-- name:end -->.
func markers(name string) (begin, end string) {
	return "<!-- " + name + ":begin -->", "<!-- " + name + ":end -->"
}

// between returns the text between name's markers in page.
func between(page, name string) (string, error) {
	begin, end := markers(name)
	i := strings.Index(page, begin)
	j := strings.Index(page, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %s ... %s pair", begin, end)
	}
	return page[i+len(begin) : j], nil
}

// replaceBetween puts content between name's markers in page, each marker
// on a line of its own.
func replaceBetween(page, name, content string) (string, error) {
	begin, end := markers(name)
	i := strings.Index(page, begin)
	j := strings.Index(page, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %s ... %s pair", begin, end)
	}
	return page[:i+len(begin)] + "\n" + content + page[j:], nil
}
