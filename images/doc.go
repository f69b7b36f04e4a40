// Package images finds, downloads, verifies and caches guest images, and
// turns a cached image into an instance's root disk.
//
// A reference is a catalog name ("vmdock", "debian-13"), a local path, a
// file:// URL or an http(s):// URL. Every fetched file lands in the cache
// under its digest, so two references to the same bytes share one copy and
// a damaged copy is noticed (and fetched again) the next time it is used.
package images
