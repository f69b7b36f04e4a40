//go:build !linux && !darwin

package images

import "errors"

func cloneFile(string, string) error { return errors.New("clone not supported") }
