// Command docs keeps vmdock's documentation tied to the code. `go run
// ./hack/docs pkgtable` rewrites the layers drawing and the package table
// in docs/architecture.md from go list, hack/layers and each package's doc
// comment; the package's tests (run by `make test`) fail when those, the
// boot steps, the configuration keys or a relative link in README.md and
// docs/ no longer match what they describe.
package main

import (
	"fmt"
	"os"
)

const usage = "usage: go run ./hack/docs pkgtable   (from the module root: rewrites the layers drawing and the package table in docs/architecture.md)"

func main() {
	if len(os.Args) != 2 || os.Args[1] != "pkgtable" {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err := writePackageTable("."); err != nil {
		fmt.Fprintln(os.Stderr, "docs:", err)
		os.Exit(1)
	}
}
