package main

import (
	"fmt"
	"io"
)

// printWarnings puts each config warning on its own line, so they stand
// out from progress output and scripts can grep for them.
func printWarnings(w io.Writer, warnings []string) {
	for _, s := range warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
}
