module github.com/vmdock/vmdock

go 1.26.0

require (
	github.com/Code-Hex/vz/v3 v3.7.1
	github.com/cheggaaa/pb/v3 v3.3.0
	github.com/creack/pty v1.1.24
	github.com/hashicorp/yamux v0.1.2
	github.com/kdomanski/iso9660 v0.4.0
	github.com/klauspost/compress v1.20.4
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	golang.org/x/net v0.63.0
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/Code-Hex/go-infinity-channel v1.0.0 // indirect
	github.com/VividCortex/ewma v1.2.0 // indirect
	github.com/clipperhouse/uax29/v2 v2.2.0 // indirect
	github.com/fatih/color v1.19.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mattn/go-colorable v0.1.16 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/mattn/go-runewidth v0.0.31 // indirect
	golang.org/x/mod v0.22.0 // indirect
)
