// Command release writes images.json, the release manifest `vmdock start`
// downloads first, for the guest image archives in a folder:
//
//	go run ./hack/release --dir bin/release --version v1.2.3 [--arch amd64,arm64]
//
// `make release` runs it after putting the archives there.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vmdock/vmdock/images"
)

func main() {
	dir := flag.String("dir", "bin/release", "folder holding vmdock-<arch>.tar.zst; images.json is written there")
	version := flag.String("version", "", "the vmdock version the images are published with (required)")
	arches := flag.String("arch", "amd64,arm64", "arches to publish, comma or space separated")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: release --dir DIR --version VERSION [--arch amd64,arm64]")
		os.Exit(2)
	}
	list, err := parseArches(*arches)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(2)
	}
	m, err := Write(*dir, *version, list)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	for _, a := range list {
		img := m.Images[a]
		fmt.Printf("%s: %s, %d bytes, sha256 %s, kernel %s, docker %s, containerd %s\n",
			a, img.File, img.Size, img.SHA256, img.Kernel, img.Docker, img.Containerd)
	}
	fmt.Printf("wrote %s\n", filepath.Join(*dir, images.ReleaseManifestName))
}
