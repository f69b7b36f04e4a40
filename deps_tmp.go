//go:build tools

package deps

import (
	_ "github.com/spf13/cobra"
	_ "gopkg.in/yaml.v3"
	_ "github.com/hashicorp/yamux"
	_ "golang.org/x/sys/unix"
	_ "github.com/creack/pty"
	_ "github.com/cheggaaa/pb/v3"
	_ "github.com/kdomanski/iso9660"
	_ "github.com/Code-Hex/vz/v3"
	_ "golang.org/x/term"
	_ "github.com/klauspost/compress/zstd"
)
