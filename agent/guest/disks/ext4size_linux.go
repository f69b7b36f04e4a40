package disks

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// The ext4 superblock fields that give the file system's size
// (Documentation/filesystems/ext4/super.rst): it starts 1024 bytes into
// the device whatever the block size.
const (
	ext4SuperOffset     = 1024
	ext4SuperSize       = 1024
	ext4BlocksCountLo   = 0x04
	ext4LogBlockSize    = 0x18
	ext4Magic           = 0x38
	ext4FeatureIncompat = 0x60
	ext4BlocksCountHi   = 0x150
	ext4MagicValue      = 0xEF53
	ext4Incompat64Bit   = 0x80
)

// ext4Room is how many whole blocks' bytes of dev lie beyond its ext4
// file system: the space resize2fs would add. The superblock is read through the block
// device's page cache, which holds the mounted file system's own copy, so
// a grow done earlier in this boot is seen.
func ext4Room(dev string) (int64, error) {
	f, err := os.Open(dev)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// SEEK_END gives a block device's size as well as a file's.
	devBytes, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dev, err)
	}
	sb := make([]byte, ext4SuperSize)
	if _, err := f.ReadAt(sb, ext4SuperOffset); err != nil {
		return 0, fmt.Errorf("read the superblock of %s: %w", dev, err)
	}
	le := binary.LittleEndian
	if le.Uint16(sb[ext4Magic:]) != ext4MagicValue {
		return 0, fmt.Errorf("%s has no ext4 superblock", dev)
	}
	logBlock := le.Uint32(sb[ext4LogBlockSize:])
	if logBlock > 6 { // ext4 blocks are 1 KiB to 64 KiB
		return 0, fmt.Errorf("%s: ext4 block size 2^(10+%d) is out of range", dev, logBlock)
	}
	blockSize := int64(1024) << logBlock
	blocks := uint64(le.Uint32(sb[ext4BlocksCountLo:]))
	if le.Uint32(sb[ext4FeatureIncompat:])&ext4Incompat64Bit != 0 {
		blocks |= uint64(le.Uint32(sb[ext4BlocksCountHi:])) << 32
	}
	devBlocks := uint64(devBytes / blockSize)
	if blocks >= devBlocks {
		return 0, nil
	}
	return int64(devBlocks-blocks) * blockSize, nil
}

// resizeIfGrown runs resize2fs on dev only when the device has at least
// one more block than its ext4 file system. Nearly every boot finds
// nothing to do, and resize2fs, a process that reads the group
// descriptors, costs a second or more under TCG to say so. When the
// superblock cannot be read resize2fs runs as it always did.
func (s *Disks) resizeIfGrown(ctx context.Context, dev string) error {
	room, err := ext4Room(s.Path(dev))
	switch {
	case err != nil:
		s.Logger().Debug("ext4 size unknown; running resize2fs", "device", dev, "err", err)
	case room == 0:
		s.Logger().Debug("ext4 fills its device; no resize", "device", dev)
		return nil
	}
	_, err = s.OS.Run(ctx, "resize2fs", dev)
	return err
}
