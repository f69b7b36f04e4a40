# Homebrew formula for vmdock, tapped from this repository (OWNER is the
# GitHub owner it is published under):
#
#   brew tap OWNER/vmdock https://github.com/OWNER/vmdock
#   brew install OWNER/vmdock/vmdock
#
# It builds the tagged source, so the binary is signed on the Mac that runs
# it. Publishing a release runs .github/workflows/formula.yml
# (hack/ci/commit-formula.sh), which rewrites homepage, url, sha256 and
# image_manifest_sha256 for it; edit the rest here. Homebrew supports
# Apple silicon only (Intel Macs: the release's vmdock-darwin-amd64).
class Vmdock < Formula
  desc "Docker engine in a Linux VM (Virtualization.framework on macOS, QEMU on Linux)"
  homepage "https://github.com/vmdock/vmdock"
  url "https://github.com/vmdock/vmdock/archive/refs/tags/v0.0.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license "Apache-2.0"
  head "https://github.com/vmdock/vmdock.git", branch: "main"

  depends_on "go" => :build
  depends_on arch: :arm64
  # Virtualization.framework as vmdock uses it: macOS 13.
  depends_on macos: :ventura

  # The sha256 of the images.json published with this release: the build
  # refuses any other manifest from the release's download URL.
  def image_manifest_sha256
    "0000000000000000000000000000000000000000000000000000000000000000"
  end

  def install
    # A tarball has no git history for the Makefile to name the version or
    # find the release by, so both are given; a --HEAD build has neither a
    # release nor pinned images.
    args = []
    unless build.head?
      args << "VERSION=v#{version}"
      args << "IMAGE_BASE_URL=#{homepage}/releases/download/v#{version}/"
      args << "IMAGE_MANIFEST_SHA256=#{image_manifest_sha256}"
    end
    system "make", "build", *args
    bin.install "bin/vmdock"
    generate_completions_from_executable(bin/"vmdock", "completion", shells: [:bash, :zsh, :fish])
  end

  test do
    version_output = shell_output("#{bin}/vmdock version")
    assert_match "vmdock v#{version}", version_output unless version.head?
    assert_match "manifest: sha256:#{image_manifest_sha256}", version_output unless version.head?
    # doctor exits 1 when a check fails (the test sandbox cannot boot a
    # VM); what matters here is that it runs and reports as JSON.
    report = JSON.parse(shell_output("#{bin}/vmdock doctor --json", nil))
    names = report["checks"].map { |c| c["name"] }
    assert_includes names, "signature"
    assert_includes names, "cgo"
  end
end
