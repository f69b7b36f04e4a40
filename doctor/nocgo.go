//go:build !cgo

package doctor

// cgoEnabled: see cgo.go.
const cgoEnabled = false
