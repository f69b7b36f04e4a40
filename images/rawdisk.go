package images

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A raw image boots through EFI, whose firmware looks for a partition
// table; without one the VM would only reach the firmware shell. Checking
// for it at import turns a wrong file (a text file, an empty one, a
// filesystem image) into a refusal instead of a VM that never boots.

const (
	sectorSize     = 512
	minRawDiskSize = 1 << 20 // the smallest disk an EFI system partition fits on
	mbrSignatureAt = 510
	mbrEntriesAt   = 446
	mbrEntrySize   = 16
	mbrTypeGPT     = 0xee // the protective MBR's entry, standing for a GPT
)

var gptSignature = []byte("EFI PART")

// acceptedImages ends every refusal of a fetched file, so the user learns
// what would have been taken.
const acceptedImages = "accepted: a vmdock .tar.zst, qcow2, or a raw disk with a partition table"

// checkRawDisk refuses a raw disk of size bytes that EFI could not boot:
// smaller than 1 MiB, not whole sectors, or with neither a sane MBR nor a
// GPT header at LBA 1.
func checkRawDisk(r io.ReaderAt, size int64) error {
	if size < minRawDiskSize {
		return fmt.Errorf("not a disk image (%d bytes, a raw disk has at least %s; %s)", size, humanSize(minRawDiskSize), acceptedImages)
	}
	if size%sectorSize != 0 {
		return fmt.Errorf("not a disk image (%d bytes is not a whole number of %d-byte sectors; %s)", size, sectorSize, acceptedImages)
	}
	head := make([]byte, 2*sectorSize)
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read disk image: %w", err)
	}
	if bytes.Equal(head[sectorSize:sectorSize+len(gptSignature)], gptSignature) {
		return nil
	}
	if head[mbrSignatureAt] != 0x55 || head[mbrSignatureAt+1] != 0xaa {
		return fmt.Errorf("not a disk image (no MBR or GPT; %s)", acceptedImages)
	}
	if err := checkMBREntries(head[:sectorSize], size/sectorSize); err != nil {
		return fmt.Errorf("not a disk image (boot signature, but %v; %s)", err, acceptedImages)
	}
	return nil
}

// checkMBREntries wants at least one used partition entry and every used
// one inside a disk of sectors sectors; a filesystem boot sector also ends
// in 0x55AA, but its boot code makes no such table.
func checkMBREntries(mbr []byte, sectors int64) error {
	used := 0
	for i := range 4 {
		e := mbr[mbrEntriesAt+i*mbrEntrySize:][:mbrEntrySize]
		status, typ := e[0], e[4]
		start := int64(binary.LittleEndian.Uint32(e[8:]))
		count := int64(binary.LittleEndian.Uint32(e[12:]))
		if typ == 0 {
			continue
		}
		if status != 0 && status != 0x80 {
			return fmt.Errorf("partition %d has status 0x%02x (want 0x00 or 0x80)", i+1, status)
		}
		// Called only without a GPT header, where a protective MBR
		// protects nothing: the GPT it stands for is gone.
		if typ == mbrTypeGPT {
			return errors.New("a protective MBR and no GPT header at LBA 1")
		}
		if start == 0 || count == 0 || start+count > sectors {
			return fmt.Errorf("partition %d spans sectors %d+%d of a %d-sector disk", i+1, start, count, sectors)
		}
		used++
	}
	if used == 0 {
		return errors.New("no partition entry")
	}
	return nil
}
