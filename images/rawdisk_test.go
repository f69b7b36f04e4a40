package images

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"
)

// rawDisk is a 1 MiB raw disk with an MBR holding one EFI system
// partition, and tag after the partition table so each tag hashes apart.
func rawDisk(tag string) []byte {
	d := make([]byte, minRawDiskSize)
	setMBREntry(d, 0, 0x00, 0xef, 64, 2048-64) // to the last sector
	d[mbrSignatureAt], d[mbrSignatureAt+1] = 0x55, 0xaa
	copy(d[2*sectorSize:], tag)
	return d
}

// gptDisk is a 1 MiB disk with a protective MBR and a GPT header.
func gptDisk() []byte {
	d := make([]byte, minRawDiskSize)
	setMBREntry(d, 0, 0x00, mbrTypeGPT, 1, 0xffffffff)
	d[mbrSignatureAt], d[mbrSignatureAt+1] = 0x55, 0xaa
	copy(d[sectorSize:], gptSignature)
	return d
}

func setMBREntry(d []byte, i int, status, typ byte, start, count uint32) {
	e := d[mbrEntriesAt+i*mbrEntrySize:]
	e[0], e[4] = status, typ
	binary.LittleEndian.PutUint32(e[8:], start)
	binary.LittleEndian.PutUint32(e[12:], count)
}

func edited(d []byte, edit func([]byte)) []byte {
	d = bytes.Clone(d)
	edit(d)
	return d
}

func TestCheckRawDisk(t *testing.T) {
	tests := []struct {
		name string
		disk []byte
		want string // "" for accepted
	}{
		{"mbr", rawDisk("x"), ""},
		{"gpt behind a protective mbr", gptDisk(), ""},
		{"gpt header alone", edited(gptDisk(), func(d []byte) { clear(d[:sectorSize]) }), ""},
		{"larger, whole sectors", append(rawDisk("x"), make([]byte, 3*sectorSize)...), ""},
		{"bootable flag", edited(rawDisk("x"), func(d []byte) { d[mbrEntriesAt] = 0x80 }), ""},

		{"empty", nil, "0 bytes, a raw disk has at least 1 MiB"},
		{"text", []byte("root:x:0:0:root:/root:/bin/bash\n"), "32 bytes"},
		{"just under 1 MiB", rawDisk("x")[:minRawDiskSize-sectorSize], "1048064 bytes"},
		{"part of a sector", append(rawDisk("x"), 1), "not a whole number of 512-byte sectors"},
		{"zeros", make([]byte, minRawDiskSize), "no MBR or GPT"},
		{"text padded to 1 MiB", append([]byte(strings.Repeat("notes ", 1000)), make([]byte, minRawDiskSize-6000)...), "no MBR or GPT"},
		{"signature, empty table", edited(rawDisk("x"), func(d []byte) { clear(d[mbrEntriesAt:mbrSignatureAt]) }), "no partition entry"},
		{"partition past the end", edited(rawDisk("x"), func(d []byte) { setMBREntry(d, 1, 0, 0x83, 2000, 100) }), "partition 2 spans sectors 2000+100 of a 2048-sector disk"},
		{"partition at sector 0", edited(rawDisk("x"), func(d []byte) { setMBREntry(d, 0, 0, 0x83, 0, 10) }), "partition 1 spans"},
		{"bad status", edited(rawDisk("x"), func(d []byte) { d[mbrEntriesAt] = 0x12 }), "partition 1 has status 0x12"},
		{"protective mbr, no gpt", edited(gptDisk(), func(d []byte) { clear(d[sectorSize : 2*sectorSize]) }), "protective MBR and no GPT header"},
		// A FAT boot sector ends in 0x55AA too; its boot code is no table.
		{"filesystem boot sector", edited(make([]byte, minRawDiskSize), func(d []byte) {
			for i := range d[:mbrSignatureAt] {
				d[i] = byte(i*7 + 3)
			}
			d[mbrSignatureAt], d[mbrSignatureAt+1] = 0x55, 0xaa
		}), "boot signature, but partition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkRawDisk(bytes.NewReader(tt.disk), int64(len(tt.disk)))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want a refusal naming %q", tt.want)
			}
			for _, w := range []string{"not a disk image", tt.want, acceptedImages} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is more than one line", err)
			}
		})
	}
}

// sparseDisk reads as head followed by zeros up to size, so the fuzzer can
// try any disk size without making its bytes.
type sparseDisk struct {
	head []byte
	size int64
}

func (s sparseDisk) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	n := len(p)
	if rest := s.size - off; int64(n) > rest {
		n = int(rest)
	}
	clear(p[:n])
	if off < int64(len(s.head)) {
		copy(p[:n], s.head[off:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func FuzzRawDisk(f *testing.F) {
	f.Add(rawDisk("x")[:2*sectorSize], int64(minRawDiskSize))
	f.Add(gptDisk()[:2*sectorSize], int64(minRawDiskSize))
	f.Add([]byte("hello"), int64(5))
	f.Add([]byte{}, int64(-1))
	f.Fuzz(func(t *testing.T, head []byte, size int64) {
		err := checkRawDisk(sparseDisk{head, size}, size)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is more than one line", err)
			}
			return
		}
		// Whatever passes has the shape the check promises.
		sec := make([]byte, 2*sectorSize)
		sparseDisk{head, size}.ReadAt(sec, 0)
		gpt := bytes.Equal(sec[sectorSize:sectorSize+8], gptSignature)
		mbr := sec[mbrSignatureAt] == 0x55 && sec[mbrSignatureAt+1] == 0xaa
		if size < minRawDiskSize || size%sectorSize != 0 || !(gpt || mbr) {
			t.Errorf("accepted a %d-byte disk (gpt %v, mbr %v)", size, gpt, mbr)
		}
	})
}
