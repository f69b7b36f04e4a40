#!/usr/bin/env bash
# Prints the image base URL a source build at a release tag should embed:
# https://github.com/OWNER/REPO/releases/download/TAG/ when origin is a
# github.com repository (https or ssh form) and HEAD is exactly a tag; an
# empty line otherwise (a build between tags has no published images of its
# own, and guessing another fork's would boot images it was not made with).
#
# usage: hack/release/base-url.sh   (run from the checkout; the Makefile's
# IMAGE_BASE_URL default and `make print-image-base-url`)
set -uo pipefail

tag=$(git describe --tags --exact-match HEAD 2>/dev/null) || { echo; exit 0; }
origin=$(git remote get-url origin 2>/dev/null) || { echo; exit 0; }

repo=""
case "$origin" in
  https://github.com/*) repo=${origin#https://github.com/} ;;
  https://*@github.com/*) repo=${origin#https://*@github.com/} ;;
  ssh://git@github.com/*) repo=${origin#ssh://git@github.com/} ;;
  git@github.com:*) repo=${origin#git@github.com:} ;;
esac
repo=${repo%/}
repo=${repo%.git}
if ! [[ "$repo" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]]; then
  echo
  exit 0
fi
echo "https://github.com/$repo/releases/download/$tag/"
