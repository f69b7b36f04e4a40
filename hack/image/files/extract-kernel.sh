#!/bin/bash
# extract-kernel.sh IN OUT ARCH: copies the kernel for direct boot. vz on
# arm64 wants the uncompressed Image, so a gzip'd Image or an EFI zboot
# image (gzip/zstd payload) is decompressed; x86 bzImage is copied as is.
set -euo pipefail
in=$1 out=$2 arch=$3

if [ "$arch" != arm64 ]; then
	cp "$in" "$out"
	exit 0
fi
magic=$(head -c 2 "$in" | od -An -tx1 | tr -d ' \n')
if [ "$magic" = 1f8b ]; then
	gzip -dc "$in" >"$out"
elif [ "$(dd if="$in" bs=1 skip=4 count=4 2>/dev/null)" = zimg ]; then
	le32() { od -An -tu4 -j "$1" -N4 --endian=little "$in" | tr -d ' '; }
	off=$(le32 8)
	size=$(le32 12)
	comp=$(dd if="$in" bs=1 skip=24 count=32 2>/dev/null | tr -d '\0')
	case $comp in
	gzip) tail -c +$((off + 1)) "$in" | head -c "$size" | gzip -dc >"$out" ;;
	zstd) tail -c +$((off + 1)) "$in" | head -c "$size" | zstd -dc >"$out" ;;
	*) echo "extract-kernel: zboot payload compressed with '$comp' (handled: gzip, zstd)" >&2; exit 1 ;;
	esac
else
	cp "$in" "$out"
fi
# An arm64 Image carries "ARM\x64" at offset 56.
if [ "$(dd if="$out" bs=1 skip=56 count=4 2>/dev/null | od -An -tx1 | tr -d ' \n')" != 41524d64 ]; then
	echo "extract-kernel: $out is not an arm64 Image" >&2
	exit 1
fi
