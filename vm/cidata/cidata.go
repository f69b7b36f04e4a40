// Package cidata writes the small boot disk every instance gets: an ISO9660
// image labelled "cidata" holding the guest agent and its config. The
// guest image's boot unit runs the agent from it, so every boot runs the
// agent of the vmdock that started it.
package cidata

import (
	"bytes"
	"fmt"
	"io"
	"sort"

	"github.com/kdomanski/iso9660"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// Label is the volume label the guest's boot unit mounts.
const Label = "cidata"

// Write creates the ISO at path from name->content, replacing any old one
// atomically so a VM never sees a half-written boot disk.
func Write(path string, files map[string][]byte) error {
	w, err := iso9660.NewWriter()
	if err != nil {
		return fmt.Errorf("boot disk %s: %w", path, err)
	}
	defer w.Cleanup()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := w.AddFile(bytes.NewReader(files[name]), name); err != nil {
			return fmt.Errorf("boot disk %s: add %s: %w", path, name, err)
		}
	}
	if err := atomicfile.Write(path, 0o600, func(f io.Writer) error { return w.WriteTo(f, Label) }); err != nil {
		return fmt.Errorf("boot disk: %w", err)
	}
	return nil
}
