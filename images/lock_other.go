//go:build !linux && !darwin

package images

func (c *Cache) lock() (func(), error) { return func() {}, nil }
