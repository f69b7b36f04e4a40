// Command compress zstd-compresses one file; the Makefile uses it so
// `make build` needs no zstd binary on the build machine.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: compress IN OUT")
		os.Exit(2)
	}
	if err := compress(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "compress:", err)
		os.Exit(1)
	}
}

func compress(in, out string) error {
	src, err := os.Open(in)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := out + ".tmp"
	dst, err := os.Create(tmp)
	if err != nil {
		return err
	}
	enc, err := zstd.NewWriter(dst, zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	if err != nil {
		dst.Close()
		return err
	}
	if _, err := io.Copy(enc, src); err != nil {
		enc.Close()
		dst.Close()
		return fmt.Errorf("compress %s: %w", in, err)
	}
	if err := enc.Close(); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
