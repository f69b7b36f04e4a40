package images

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// ImageFormat is the vmdock image layout this binary understands: a
// zstd-compressed tar holding manifest.json, disk.raw, vmlinuz and
// initrd.img. A published manifest with another number is refused before
// anything is downloaded, since an older binary cannot know what changed.
const ImageFormat = 1

// ReleaseManifestName is the file a release's base URL serves.
const ReleaseManifestName = "images.json"

// BaseURL is where published images live by default, set at build time
// (-ldflags -X github.com/vmdock/vmdock/images.BaseURL=...); empty in a
// build that has none, where only local builds and imports work unless
// VMDOCK_IMAGE_BASE_URL or imageBaseURL names one.
var BaseURL = ""

// ManifestSHA256 is the sha256 (hex) of the images.json published with
// this build's release, set at build time (-ldflags -X
// github.com/vmdock/vmdock/images.ManifestSHA256=...). A start that takes
// its images from BaseURL refuses a manifest with another digest: the
// images a release binary boots are the ones released with it, even if the
// files at BaseURL are replaced. Empty: not pinned. Overrides (the
// environment, imageBaseURL), imports and local builds are never pinned:
// whoever names other images means them.
var ManifestSHA256 = ""

// BaseURLEnv overrides BaseURL and the config's imageBaseURL.
const BaseURLEnv = "VMDOCK_IMAGE_BASE_URL"

// ReleaseManifest is images.json: what a release publishes, per arch.
type ReleaseManifest struct {
	ImageFormat int                     `json:"imageFormat"`
	Images      map[string]ReleaseImage `json:"images"` // by arch (amd64, arm64)
}

// ReleaseImage is one arch's published image.
type ReleaseImage struct {
	File          string `json:"file"` // relative to the manifest's URL
	Size          int64  `json:"size"`
	SHA256        string `json:"sha256"` // hex
	Kernel        string `json:"kernel"`
	Docker        string `json:"docker"`
	Containerd    string `json:"containerd"`
	VMDockVersion string `json:"vmdockVersion"` // the vmdock build it was made with
	BuildTime     string `json:"buildTime,omitempty"`
}

// maxReleaseManifest caps what is read of images.json.
const maxReleaseManifest = 1 << 20

// ParseReleaseManifest reads and checks images.json. where names it in
// errors (its URL or path).
func ParseReleaseManifest(r io.Reader, where string) (*ReleaseManifest, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxReleaseManifest+1))
	if err != nil {
		return nil, fmt.Errorf("image manifest %s: %w", where, err)
	}
	if len(b) > maxReleaseManifest {
		return nil, fmt.Errorf("image manifest %s: larger than %d bytes", where, maxReleaseManifest)
	}
	var m ReleaseManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("image manifest %s: not JSON: %w", where, err)
	}
	if m.ImageFormat != ImageFormat {
		return nil, fmt.Errorf("image manifest %s: imageFormat %d, but this vmdock understands imageFormat %d (use a vmdock release that matches the images, or point %s at matching images)",
			where, m.ImageFormat, ImageFormat, BaseURLEnv)
	}
	for arch, img := range m.Images {
		if err := img.check(arch); err != nil {
			return nil, fmt.Errorf("image manifest %s: %s: %w", where, arch, err)
		}
	}
	return &m, nil
}

func (img ReleaseImage) check(arch string) error {
	if err := checkArch(arch); err != nil {
		return err
	}
	if img.File == "" || strings.ContainsAny(img.File, "/\\?#") || img.File == "." || img.File == ".." {
		return fmt.Errorf("file %q: want a plain file name", img.File)
	}
	if img.Size <= 0 {
		return fmt.Errorf("size %d: want a positive byte count", img.Size)
	}
	if _, err := ParseDigest("sha256:" + img.SHA256); err != nil {
		return fmt.Errorf("sha256: %w", err)
	}
	return nil
}

// ForArch returns arch's image, or a one-line error naming the arches the
// manifest has.
func (m *ReleaseManifest) ForArch(arch, where string) (ReleaseImage, error) {
	img, ok := m.Images[arch]
	if !ok {
		var have []string
		for a := range m.Images {
			have = append(have, a)
		}
		return ReleaseImage{}, fmt.Errorf("image manifest %s has no %s image (it has: %s)", where, arch, strings.Join(sortedOrNone(have), ", "))
	}
	return img, nil
}

func sortedOrNone(s []string) []string {
	if len(s) == 0 {
		return []string{"none"}
	}
	sort.Strings(s)
	return s
}
