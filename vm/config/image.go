package config

import "strings"

// imageRefAccepted names what `image:` may hold, for refusals.
const imageRefAccepted = "a catalog name such as vmdock, an imported name, a path, or a file://, http:// or https:// URL"

// imageSchemeOK follows the images package's resolve: a reference with
// "://" must start with one of the schemes it fetches. Names and paths are
// checked when the image is fetched, with the cache and files at hand;
// an unknown scheme never works, so it is refused before anything starts.
func imageSchemeOK(ref string) bool {
	if !strings.Contains(ref, "://") {
		return true
	}
	for _, scheme := range []string{"file://", "http://", "https://"} {
		if strings.HasPrefix(ref, scheme) {
			return true
		}
	}
	return false
}
