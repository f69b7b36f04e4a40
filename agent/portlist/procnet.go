package portlist

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcNet lists forwardable sockets from dir's tcp, tcp6, udp and udp6
// tables (dir is /proc/net in the guest; tests pass their own).
func ProcNet(dir string) ([]Port, error) {
	var out []Port
	for _, f := range []struct{ file, proto string }{{"tcp", "tcp"}, {"tcp6", "tcp"}, {"udp", "udp"}, {"udp6", "udp"}} {
		fh, err := os.Open(filepath.Join(dir, f.file))
		if errors.Is(err, os.ErrNotExist) {
			continue // no IPv6 in this kernel
		}
		if err != nil {
			return nil, err
		}
		ps, err := parseProcNet(fh, f.proto)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, f.file), err)
		}
		out = append(out, ps...)
	}
	sortPorts(out)
	return out, nil
}

// parseProcNet reads one /proc/net/{tcp,tcp6,udp,udp6} table.
func parseProcNet(r io.Reader, proto string) ([]Port, error) {
	var out []Port
	err := scanProcNet(r, proto, func(p Port, _ uint64) { out = append(out, p) })
	return out, err
}

// scanProcNet calls found with each forwardable socket of one table and
// its inode (0 when the line has none).
func scanProcNet(r io.Reader, proto string, found func(p Port, inode uint64)) error {
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first { // header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		local, remote := f[1], f[2]
		st, err := strconv.ParseUint(f[3], 16, 8)
		if err != nil {
			return fmt.Errorf("parse %s state %q: %w", proto, f[3], err)
		}
		if proto == "tcp" && st != stateListen {
			continue
		}
		if proto == "udp" && (st != stateClose || !strings.HasSuffix(remote, ":0000")) {
			continue
		}
		ip, port, err := parseHexAddr(local)
		if err != nil {
			return fmt.Errorf("parse %s address %q: %w", proto, local, err)
		}
		if !forwardable(ip, port) {
			continue
		}
		var inode uint64
		if len(f) > 9 {
			inode, _ = strconv.ParseUint(f[9], 10, 64)
		}
		found(Port{Proto: proto, IP: ip, Port: port}, inode)
	}
	return sc.Err()
}

// parseHexAddr decodes "0100007F:1F90": the address is printed as 32-bit
// words in the kernel's (little-endian on amd64 and arm64) byte order, the
// port as a plain hex number.
func parseHexAddr(s string) (netip.Addr, int, error) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.Addr{}, 0, fmt.Errorf("no port")
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.Addr{}, 0, err
	}
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return netip.Addr{}, 0, fmt.Errorf("bad address %q", h)
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	a, _ := netip.AddrFromSlice(b)
	return a.Unmap(), int(port), nil
}
