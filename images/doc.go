// Package images finds, downloads, verifies and caches guest images, and
// turns a cached image into an instance's root disk.
//
// A reference is the catalog name "vmdock" (a local build, the last
// imported vmdock image, or the published one named by the release
// manifest images.json at the image base URL), an imported name, a local
// path, a file:// URL or an http(s):// URL. Every fetched file lands in the
// cache under its digest, so two references to the same bytes share one
// copy and a damaged copy is noticed (and fetched again) the next time it
// is used. An existing instance boots the image it was made from (Options.Pin).
package images
