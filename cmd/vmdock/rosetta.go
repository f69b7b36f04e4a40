package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/vz"
)

// offerRosetta makes sure Rosetta is installed before a --vz-rosetta
// start: the host agent that boots the VM runs detached, so this is the
// last moment a terminal can ask the user.
func offerRosetta(ctx context.Context, cfg config.Config, in io.Reader, errOut io.Writer) error {
	if !cfg.VZRosetta || cfg.VMType != driver.TypeVZ {
		return nil
	}
	return vz.OfferRosettaInstall(ctx, isTerminal(in) && isTerminal(errOut), func(question string) (bool, error) {
		return askYes(in, errOut, question)
	})
}

// askYes prints question and reads one line: y or yes (any case) is yes,
// anything else no.
func askYes(in io.Reader, out io.Writer, question string) (bool, error) {
	fmt.Fprint(out, question)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		return false, fmt.Errorf("read answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}
