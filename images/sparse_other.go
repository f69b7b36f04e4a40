//go:build !linux && !darwin

package images

import (
	"errors"
	"os"
)

func dataRegions(*os.File, int64) ([]region, error) {
	return nil, errors.New("SEEK_DATA not supported")
}
