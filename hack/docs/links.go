package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	fence      = regexp.MustCompile("(?m)^\\s*```.*$")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	heading    = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// DocPages is README.md and every page under docs/, relative to root.
func DocPages(root string) ([]string, error) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	out := []string{"README.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	return out, nil
}

// prose is markdown with code blocks and code spans blanked out, since a
// link written there is an example, not a link.
func prose(page string) string {
	var b strings.Builder
	inFence, inIndented, prevBlank := false, false, true
	for _, line := range strings.SplitAfter(page, "\n") {
		blank := strings.TrimSpace(line) == ""
		switch {
		case fence.MatchString(line):
			inFence = !inFence
			b.WriteString("\n")
		case inFence:
			b.WriteString("\n")
		case strings.HasPrefix(line, "    ") && !blank && (prevBlank || inIndented):
			// an indented code block starts after a blank line
			inIndented = true
			b.WriteString("\n")
		default:
			if !blank {
				inIndented = false
			}
			b.WriteString(inlineCode.ReplaceAllString(line, "``"))
		}
		prevBlank = blank
	}
	return b.String()
}

// anchors are the fragment ids GitHub gives a page's headings (and any
// explicit <a name=...>).
func anchors(page string) map[string]bool {
	ids := map[string]bool{}
	count := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(proseWithCode(page), -1) {
		slug := slugify(m[1])
		id := slug
		if n := count[slug]; n > 0 {
			id = fmt.Sprintf("%s-%d", slug, n)
		}
		count[slug]++
		ids[id] = true
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(page, -1) {
		ids[m[1]] = true
	}
	return ids
}

var linkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// slugify is GitHub's heading id: lower case, punctuation dropped (not
// '-' or '_'), spaces as '-'.
func slugify(h string) string {
	h = linkText.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLinks reports every relative link in pages (paths relative to root)
// whose file or heading anchor does not exist.
func checkLinks(root string, pages []string) []string {
	var problems []string
	texts := map[string]string{}
	read := func(rel string) (string, bool) {
		if t, ok := texts[rel]; ok {
			return t, true
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return "", false
		}
		texts[rel] = string(b)
		return texts[rel], true
	}
	for _, page := range pages {
		text, ok := read(page)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: cannot read it", page))
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(prose(text), -1) {
			if p := checkLink(root, page, m[1], read); p != "" {
				problems = append(problems, p)
			}
		}
	}
	return problems
}

// checkLink says what is wrong with one link target in page, or "".
func checkLink(root, page, target string, read func(string) (string, bool)) string {
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Sprintf("%s: link %q does not parse: %v", page, target, err)
	}
	if u.Scheme != "" || strings.HasPrefix(target, "//") {
		return "" // off the repository: not this test's to fetch
	}
	rel := page
	if u.Path != "" {
		rel = filepath.Clean(filepath.Join(filepath.Dir(page), u.Path))
		if strings.HasPrefix(rel, "..") {
			return fmt.Sprintf("%s: link %q leaves the repository", page, target)
		}
		if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
			return fmt.Sprintf("%s: link %q points at %s, which does not exist: fix the link in %s", page, target, rel, page)
		}
	}
	if u.Fragment == "" || !strings.HasSuffix(rel, ".md") {
		return ""
	}
	text, ok := read(rel)
	if !ok {
		return fmt.Sprintf("%s: link %q: cannot read %s", page, target, rel)
	}
	if !anchors(text)[u.Fragment] {
		return fmt.Sprintf("%s: link %q: %s has no heading with the anchor #%s: fix the link in %s or the heading in %s", page, target, rel, u.Fragment, page, rel)
	}
	return ""
}
