package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/vm/store"
)

// newImageCmd is the `vmdock image` command tree: the guest image cache.
func newImageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage guest images (build, list, import, rm, prune)",
		Long: "Guest images live in the image cache ($VMDOCK_CACHE, default " +
			"~/Library/Application Support/vmdock on macOS and $XDG_CACHE_HOME/vmdock on Linux), named by digest.",
	}
	cmd.AddCommand(newImageBuildCmd(), newImageListCmd(g), newImageImportCmd(), newImageRmCmd(), newImagePruneCmd(g))
	return cmd
}

func newImageBuildCmd() *cobra.Command {
	var arch string
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the vmdock image from Debian packages (Linux, root)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return images.Build(cmd.Context(), arch, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&arch, "arch", runtime.GOARCH, "guest architecture (amd64, arm64)")
	return cmd
}

func newImageListCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List cached images",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := images.OpenCache("")
			if err != nil {
				return err
			}
			entries, err := c.Entries()
			if err != nil {
				return err
			}
			rows := imageRows(entries, defaultDigests(cmd.Context(), g))
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			return writeImageTable(cmd.OutOrStdout(), rows)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// imageRow is one element of `vmdock image list --json`: the cache entry,
// and whether a start without --image uses it for its arch.
type imageRow struct {
	images.Entry
	Default bool `json:"default"`
}

func imageRows(entries []images.Entry, defaults map[string]bool) []imageRow {
	rows := []imageRow{}
	for _, e := range entries {
		rows = append(rows, imageRow{Entry: e, Default: defaults[e.Digest]})
	}
	return rows
}

// defaultDigests are the images a default start would use, per arch, as
// far as this machine knows without the network.
func defaultDigests(ctx context.Context, g *globals) map[string]bool {
	var u images.Used
	u.AddDefaults(ctx, images.Options{BaseURL: configuredBaseURL(g)})
	return u.Defaults
}

// configuredBaseURL is the profile's imageBaseURL, else the template's.
func configuredBaseURL(g *globals) string {
	if inst, err := g.instance(); err == nil {
		if cfg, err := inst.LoadConfig(g.host); err == nil {
			return cfg.ImageBaseURL
		}
		if cfg, err := baseConfig(filepath.Dir(inst.Dir), g.host); err == nil {
			return cfg.ImageBaseURL
		}
	}
	return ""
}

func writeImageTable(w io.Writer, rows []imageRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tARCH\tKIND\tDIGEST\tSIZE\tDEFAULT\tSOURCE")
	for _, r := range rows {
		e := r.Entry
		name := e.Name
		if name == "" {
			name = "-"
		}
		arch := e.Arch
		if arch == "" {
			arch = "-"
		}
		def := ""
		if r.Default {
			def = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f MiB\t%s\t%s\n", name, arch, e.Kind, shortDigest(e.Digest), float64(e.Size)/(1<<20), def, e.Source)
	}
	return tw.Flush()
}

// shortDigest keeps enough of a digest to pass to `image rm`.
func shortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) < 12 {
		return d
	}
	return algo + ":" + hex[:12]
}

func newImageImportCmd() *cobra.Command {
	var name, arch, digest string
	cmd := &cobra.Command{
		Use:   "import <path-or-url>",
		Short: "Add an image file or URL to the cache (a vmdock .tar.zst, or a raw or qcow2 disk)",
		Long: "Add an image file or URL to the cache (a vmdock .tar.zst, or a raw or qcow2 disk).\n\n" +
			"The file is checked before it is listed, and a refused one adds nothing:\n" +
			"a vmdock image must unpack to manifest.json, disk.raw, vmlinuz and initrd.img\n" +
			"matching the manifest (it is unpacked once, here, for start to use); a raw disk\n" +
			"needs at least 1 MiB and an MBR or GPT partition table, as it boots with EFI;\n" +
			"a qcow2 disk must stand alone: one with a backing file, an external data file or\n" +
			"encryption is refused; `qemu-img convert -O qcow2 <in> <out>` makes a copy that\n" +
			"can be imported.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			errw := cmd.ErrOrStderr()
			e, err := images.Import(cmd.Context(), args[0], arch, images.Options{
				Progress: errw,
				IsTTY:    imageProgressIsTTY(errw),
				Name:     name,
				Digest:   digest,
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %s (%s, %s)\n", e.Digest, e.Kind, e.Arch)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "name to use the image by (`vmdock start --image <name>`)")
	cmd.Flags().StringVar(&arch, "arch", "", "guest architecture of the image (amd64, arm64); default: a vmdock image's own, a disk's this host's")
	cmd.Flags().StringVar(&digest, "digest", "", "expected digest, sha256:<hex> or sha512:<hex>")
	return cmd
}

func newImageRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm <name|digest>...",
		Aliases: []string{"remove"},
		Short:   "Remove cached images by name, source or digest (a prefix of 8+ hex digits is enough)",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := images.OpenCache("")
			if err != nil {
				return err
			}
			for _, q := range args {
				found, err := c.Find(q)
				if err != nil {
					return err
				}
				if len(found) == 0 {
					return fmt.Errorf("image %q: no cached image has this name, source or digest (see `vmdock image list`)", q)
				}
				for _, e := range found {
					if err := c.Remove(e.Digest); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", e.Digest)
				}
			}
			return nil
		},
	}
}

func newImagePruneCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "prune",
		Short: "Remove cached images no instance uses (never the one a default start uses, nor a partial download younger than 7 days)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			home, err := store.Home()
			if err != nil {
				return err
			}
			used, err := images.UsedBy(home)
			if err != nil {
				return err
			}
			used.AddDefaults(cmd.Context(), images.Options{BaseURL: configuredBaseURL(g)})
			c, err := images.OpenCache("")
			if err != nil {
				return err
			}
			removed, err := c.Prune(used)
			for _, e := range removed {
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s %s\n", e.Digest, e.Name)
			}
			return err
		},
	}
}

// imageProgressIsTTY reports whether w is a terminal, for drawing progress bars.
func imageProgressIsTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
