package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/vm/layout"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the vmdock version, where its images come from and the manifest it is pinned to",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeVersion(cmd.OutOrStdout())
		},
	}
}

// writeVersion prints what a bug report needs to know about this build:
// the version, the images a default start downloads and whether their
// manifest is pinned to the one released with it.
func writeVersion(w io.Writer) error {
	fmt.Fprintf(w, "vmdock %s (%s, %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "instance folder format: %d (reads %d to %d)\n", layout.Current, layout.FormatNoRuntime, layout.Current)
	if images.BaseURL != "" {
		fmt.Fprintf(w, "images: %s\n", images.BaseURL)
	} else {
		fmt.Fprintf(w, "images: no default download URL (local builds, imports, %s or imageBaseURL)\n", images.BaseURLEnv)
	}
	pin, err := images.PinnedManifest()
	switch {
	case err != nil:
		fmt.Fprintln(w, "manifest: invalid pin")
		return err
	case pin == "":
		fmt.Fprintln(w, "manifest: not pinned")
	default:
		fmt.Fprintf(w, "manifest: %s (pinned: images from the URL above must match it)\n", pin)
	}
	return nil
}
