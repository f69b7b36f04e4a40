package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docs/commands.md's reference section is generated from the command
// tree; this flag rewrites it: go test ./cmd/vmdock -run TestCommandsDoc -update-commands-doc
var updateCommandsDoc = flag.Bool("update-commands-doc", false, "rewrite docs/commands.md's reference section from the command tree")

const (
	commandsDoc      = "../../docs/commands.md"
	commandsBegin    = "<!-- commands:begin -->"
	commandsEnd      = "<!-- commands:end -->"
	commandsDocRegen = "go test ./cmd/vmdock -run TestCommandsDoc -update-commands-doc"
)

// userCommands is every command a user can run, depth first in the
// tree's order: the hidden ones left out, cobra's help and completion in.
func userCommands() []*cobra.Command {
	root := newRootCmd(testHost)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var all []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		all = append(all, c)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return all
}

// commandsReference is the generated section: one row per command with
// its use line, aliases, summary and its own flags. Defaults are left
// out: some follow the host (cpus, arch).
func commandsReference() string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- generated from the command tree by `%s`; cmd/vmdock's test fails when it is stale -->\n", commandsDocRegen)
	b.WriteString("| command | what it does | flags |\n|---|---|---|\n")
	for _, c := range userCommands() {
		use := c.CommandPath() + strings.TrimPrefix(c.Use, c.Name())
		what := c.Short
		if len(c.Aliases) > 0 {
			what += " (also `" + strings.Join(c.Aliases, "`, `") + "`)"
		}
		var flags []string
		fs := c.LocalNonPersistentFlags()
		if c.HasParent() {
			fs.AddFlagSet(c.PersistentFlags())
		} else {
			fs = c.PersistentFlags()
		}
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			name := "`--" + f.Name
			if f.Shorthand != "" {
				name = "`-" + f.Shorthand + "`, " + name
			}
			if t := f.Value.Type(); t != "bool" {
				name += " " + t
			}
			flags = append(flags, name+"`: "+f.Usage)
		})
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", cell(use), text(what), text(strings.Join(flags, "\n")))
	}
	return b.String()
}

// cell makes s one markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// text is cell for prose: a <name> in it is shown, not taken for HTML,
// and its lines are kept apart.
func text(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", "<br>", "<", "&lt;", ">", "&gt;").Replace(s)
}

// The reference section is exactly what the tree gives: every command
// and flag a user can run is in it, and nothing else.
func TestCommandsDocReferenceIsFresh(t *testing.T) {
	b, err := os.ReadFile(commandsDoc)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	i, j := strings.Index(page, commandsBegin), strings.Index(page, commandsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: no %s ... %s pair", commandsDoc, commandsBegin, commandsEnd)
	}
	want := commandsReference()
	if got := page[i+len(commandsBegin)+1 : j]; got != want {
		if *updateCommandsDoc {
			page = page[:i+len(commandsBegin)] + "\n" + want + page[j:]
			if err := os.WriteFile(commandsDoc, []byte(page), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's command reference is stale: run `%s`", filepath.Base(commandsDoc), commandsDocRegen)
	}
}

// The overview table above the reference is written by hand: each row
// names commands the tree has, and every top-level command has a row.
func TestCommandsDocOverviewMatchesTheTree(t *testing.T) {
	b, err := os.ReadFile(commandsDoc)
	if err != nil {
		t.Fatal(err)
	}
	overview, _, _ := strings.Cut(string(b), commandsBegin)
	for _, p := range checkOverview(overview, userCommands()) {
		t.Error(p)
	}
}

// overviewCommand is a command line in the first cell of an overview
// row: `vmdock WORD ...`.
var overviewCommand = regexp.MustCompile("`vmdock ([a-z][a-z-]*)([^`]*)`")

// optional is a bracketed part of a command line: arguments, flags.
var optional = regexp.MustCompile(`\[[^\]]*\]`)

// checkOverview returns what is wrong with an overview table against the
// tree: a command it names that is not one, a top-level command it has no
// row for, and a subcommand missing from a row that lists its siblings.
// After the top-level word, the lower-case words outside brackets are
// subcommands as long as the command has some; `a\|b` names several.
func checkOverview(overview string, tree []*cobra.Command) []string {
	paths := map[string]*cobra.Command{}
	var top []string
	for _, c := range tree {
		paths[c.CommandPath()] = c
		if c.HasParent() && !c.Parent().HasParent() && c.Name() != "help" {
			top = append(top, c.Name())
		}
	}
	var problems []string
	seen := map[string]bool{}
	named := map[*cobra.Command]map[string]bool{} // a command's subcommands a row lists
	for _, line := range strings.Split(overview, "\n") {
		first, ok := firstCell(line)
		if !ok {
			continue
		}
		for _, m := range overviewCommand.FindAllStringSubmatch(first, -1) {
			base := "vmdock " + m[1]
			c, ok := paths[base]
			if !ok {
				problems = append(problems, fmt.Sprintf("the overview names `%s`, which is no command", base))
				continue
			}
			seen[m[1]] = true
			problems = append(problems, checkSubcommands(c, m[2], paths, named)...)
		}
	}
	for _, name := range top {
		if !seen[name] {
			problems = append(problems, fmt.Sprintf("`vmdock %s` has no row in the overview", name))
		}
	}
	// A command whose subcommands the overview lists has them all listed.
	for parent, subs := range named {
		for _, s := range parent.Commands() {
			if s.IsAvailableCommand() && !subs[s.Name()] {
				problems = append(problems, fmt.Sprintf("the overview lists subcommands of `%s` but not `%s`", parent.CommandPath(), s.CommandPath()))
			}
		}
	}
	slices.Sort(problems)
	return problems
}

// checkSubcommands checks the words after command c in an overview
// command line: outside brackets, each lower-case word (words split at
// spaces and `\|`) is a subcommand while the command has some, and a
// subcommand that has its own is where the next words are looked up.
// named records the subcommands listed.
func checkSubcommands(c *cobra.Command, rest string, paths map[string]*cobra.Command, named map[*cobra.Command]map[string]bool) []string {
	var problems []string
	words := strings.FieldsFunc(optional.ReplaceAllString(rest, ""), func(r rune) bool { return r == ' ' || r == '\\' || r == '|' })
	for _, w := range words {
		if !c.HasSubCommands() {
			break
		}
		if !lowerWord.MatchString(w) {
			continue
		}
		s, ok := paths[c.CommandPath()+" "+w]
		if !ok {
			problems = append(problems, fmt.Sprintf("the overview names `%s %s`, which is no command", c.CommandPath(), w))
			continue
		}
		if named[c] == nil {
			named[c] = map[string]bool{}
		}
		named[c][w] = true
		if s.HasSubCommands() {
			c = s
		}
	}
	return problems
}

var lowerWord = regexp.MustCompile(`^[a-z][a-z-]*$`)

// firstCell is a table row's first cell, when line is a row (not the
// header or its rule).
func firstCell(line string) (string, bool) {
	if !strings.HasPrefix(line, "| `") {
		return "", false
	}
	rest := line[2:]
	// a cell ends at the first " |" that is not escaped
	for i := 0; i+1 < len(rest); i++ {
		if rest[i] == ' ' && rest[i+1] == '|' && (i == 0 || rest[i-1] != '\\') {
			return rest[:i], true
		}
	}
	return rest, true
}

// The overview check finds a command the tree lacks, a top-level command
// without a row, and a subcommand left out of a row listing its siblings.
func TestCheckOverviewCatchesDrift(t *testing.T) {
	overview := "| command | what it does |\n|---|---|\n" +
		"| `vmdock start [flags]` | start |\n" +
		"| `vmdock sync status\\|flush [PATH]\\|reset PATH\\|pause\\|resume` | sync |\n" +
		"| `vmdock image build\\|list\\|import\\|rm` | images |\n" +
		"| `vmdock frobnicate`, `vmdock loopback-alias add\\|drop` | |\n"
	got := strings.Join(checkOverview(overview, userCommands()), "\n")
	for _, want := range []string{
		"the overview names `vmdock frobnicate`, which is no command",
		"the overview names `vmdock loopback-alias drop`, which is no command",
		"the overview lists subcommands of `vmdock image` but not `vmdock image prune`",
		"the overview lists subcommands of `vmdock loopback-alias` but not `vmdock loopback-alias status`",
		"`vmdock domains` has no row in the overview",
		"`vmdock stop` has no row in the overview",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("checkOverview missed %q; it said:\n%s", want, got)
		}
	}
	for _, wrong := range []string{"vmdock sync", "vmdock start`"} {
		for _, line := range strings.Split(got, "\n") {
			if strings.Contains(line, wrong) && !strings.Contains(line, "has no row") {
				t.Errorf("checkOverview complained of %s: %q", wrong, line)
			}
		}
	}
}
