# vmdock build. `make build` is what CI and the demo run; it needs only Go.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
PREFIX    ?= /usr/local
AGENT_DIR := agent/agentbin/bin
ARCHES    := amd64 arm64
AGENTS    := $(foreach a,$(ARCHES),$(AGENT_DIR)/vmdock-agent-linux-$(a).zst)
# Where published guest images live (images.json and the archives beside
# it), the default `vmdock start` downloads from, e.g. a GitHub release's
# download URL https://github.com/<owner>/<repo>/releases/download/<tag>/.
# Not given: a checkout of a github.com repository at exactly a tag finds
# that tag's release (hack/release/base-url.sh); any other build has no
# default download (empty).
IMAGE_BASE_URL ?= $(shell bash hack/release/base-url.sh 2>/dev/null)
# The sha256 (hex) of that release's images.json: a default start refuses
# any other manifest from IMAGE_BASE_URL. The release workflow and the
# Homebrew formula set it; empty: not pinned.
IMAGE_MANIFEST_SHA256 ?=
LDFLAGS   := -s -w -X main.Version=$(VERSION) -X github.com/vmdock/vmdock/agent.Version=$(VERSION) \
	-X github.com/vmdock/vmdock/images.BaseURL=$(IMAGE_BASE_URL) \
	-X github.com/vmdock/vmdock/images.ManifestSHA256=$(IMAGE_MANIFEST_SHA256)
# `make release` publishes both arches unless ARCH names one.
ARCH      ?=
RELEASE_DIR := bin/release

# Guest images are built from Debian packages as root on Linux; on a Mac
# the targets that build one stop at once and say how to get one instead.
linux_only = if [ "$$(uname -s)" = Darwin ]; then \
	echo "guest images are built on Linux; on a Mac, vmdock start downloads a published one (from the build's IMAGE_BASE_URL or VMDOCK_IMAGE_BASE_URL), or vmdock image import FILE takes a vmdock-<arch>.tar.zst built on a Linux machine" >&2; \
	exit 1; fi

.PHONY: all build agents test lint darwin-check print-image-base-url install image image-arm64 release e2e e2e-containerd e2e-resume e2e-sandbox e2e-upgrade deps-arm64 e2e-arm64 bench bench-remote demo clean

all: build

# vz is cgo: a Mac build must not silently fall back to the no-cgo stub.
ifeq ($(shell uname -s),Darwin)
BUILD_ENV := CGO_ENABLED=1
endif

# BIN_ARCH builds bin/vmdock for another arch of this OS (the release's
# second Mac binary); empty: this machine's. Only the binary takes it: the
# agents' build runs hack/compress here.
BIN_ARCH ?=
build: agents
	$(BUILD_ENV) $(if $(BIN_ARCH),GOARCH=$(BIN_ARCH)) $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/vmdock ./cmd/vmdock
ifeq ($(shell uname -s),Darwin)
	# Virtualization.framework refuses processes without this entitlement;
	# an ad-hoc signature is enough for a local build.
	codesign --entitlements hack/vz.entitlements --force -s - bin/vmdock
endif

# The guest agents are static linux binaries, zstd-compressed, embedded by
# package agentbin. Always rebuilt: go build is incremental and cheap.
agents:
	@mkdir -p bin $(AGENT_DIR)
	@set -e; for a in $(ARCHES); do \
		echo "agent linux/$$a"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/vmdock-agent-linux-$$a ./cmd/vmdock-agent; \
		$(GO) run ./hack/compress bin/vmdock-agent-linux-$$a $(AGENT_DIR)/vmdock-agent-linux-$$a.zst; \
	done

# The unit tests run with a TMPDIR as long as macOS's (/var/folders/xx/
# <28 chars>/T/, 49 bytes; this one 53), so a test whose unix socket
# path would not fit there fails here too: sockets go under
# internal/shortdir's folders.
MAC_TMPDIR_LEN := 53
test:
	@set -e; tmp=$$(mktemp -d /tmp/vmdock-test-tmpdir-XXXXXX); \
	long=$$tmp/$$(printf '%*s' $$(( $(MAC_TMPDIR_LEN) - $${#tmp} - 1 )) '' | tr ' ' x); \
	mkdir "$$long"; trap 'rm -rf "$$tmp"' EXIT; \
	echo "TMPDIR=$$long ($${#long} bytes)"; \
	TMPDIR=$$long $(GO) test ./...

# actionlint at a pinned version checks every workflow (the expressions,
# the runners, each action's inputs) without a GitHub runner.
ACTIONLINT := github.com/rhysd/actionlint/cmd/actionlint@v1.7.12

lint:
	$(GO) vet ./...
	$(GO) run ./hack/funclen
	@out="$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) run $(ACTIONLINT) .github/workflows/*.yml
	@set -e; for f in hack/ci/*.sh hack/release/*.sh; do bash -n "$$f"; done

# The macOS code type-checked on Linux, the e2e package included (CI runs
# TestE2EMac on a Mac).
darwin-check:
	$(GO) run ./hack/darwincheck
	GOOS=darwin CGO_ENABLED=0 $(GO) build ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) vet -tags e2e ./hack/e2e

# What a build here embeds as its image base URL (empty: none).
print-image-base-url:
	@echo '$(IMAGE_BASE_URL)'

# install copies what `make build` made and never builds: run as root
# (sudo make install), a build would leave root-owned files in bin/ and
# in Go's caches, and a Mac build signed by root.
install:
	@test -f bin/vmdock || { echo "bin/vmdock is missing: run \`make build\` first (as yourself, not root), then \`sudo make install\`" >&2; exit 1; }
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 bin/vmdock $(DESTDIR)$(PREFIX)/bin/vmdock

# The amd64 guest image, built from Debian packages (root, Debian host),
# again whenever the files under hack/image change (see ensure.sh).
image:
	@$(linux_only)
	bash hack/image/ensure.sh --arch amd64

# arm64 (the Apple Silicon guest) builds on x86 through qemu-user-static:
# about 15 minutes here.
image-arm64:
	@$(linux_only)
	bash hack/image/ensure.sh --arch arm64

# What a release publishes, in bin/release: each arch's image (built or
# brought up to date as by `make image`/`make image-arm64`) and images.json
# describing them. The images are hard-linked, not copied (1.3 GB each):
# a rebuild replaces hack/image/out's file (zstd -f unlinks it first), so
# the link keeps the bytes images.json describes.
release:
	@$(linux_only)
	@set -e; mkdir -p $(RELEASE_DIR); for a in $(or $(ARCH),$(ARCHES)); do \
		bash hack/image/ensure.sh --arch $$a; \
		ln -f hack/image/out/vmdock-$$a.tar.zst $(RELEASE_DIR)/ 2>/dev/null || \
			cp hack/image/out/vmdock-$$a.tar.zst $(RELEASE_DIR)/; \
	done
	$(GO) run ./hack/release --dir $(RELEASE_DIR) --version $(VERSION) --arch "$(or $(ARCH),$(ARCHES))"

# What the amd64 e2e targets make first. .ci/run, which made them already,
# runs two of those targets side by side with E2E_PREREQS= : two go builds
# writing bin/vmdock at once would truncate a binary the other test runs.
E2E_PREREQS ?= build image

# The main e2e boots a fresh install: it serves bin/release on loopback.
e2e: $(E2E_PREREQS)
	$(MAKE) release ARCH=amd64
	VMDOCK_E2E=1 $(GO) test -count=1 -tags e2e -v -timeout 60m -run 'TestE2E$$' ./hack/e2e/

# One containerd instance (--runtime containerd) driven through vmdock
# nerdctl: its own boot, since the runtime is fixed per instance.
e2e-containerd: $(E2E_PREREQS)
	VMDOCK_E2E_CONTAINERD=1 $(GO) test -count=1 -tags e2e -v -timeout 45m -run 'TestE2EContainerd$$' ./hack/e2e/

# Fast start: save on stop, resume on start, and the cold fall backs.
e2e-resume: $(E2E_PREREQS)
	VMDOCK_E2E_RESUME=1 $(GO) test -count=1 -tags e2e -v -timeout 45m -run 'TestE2EResume$$' ./hack/e2e/

# A sandbox for coding agents (vmdock sandbox create), in network and
# mount namespaces of its own: egress, an injected key, review, MCP.
e2e-sandbox: $(E2E_PREREQS)
	VMDOCK_E2E_SANDBOX=1 $(GO) test -count=1 -tags e2e -v -timeout 45m -run 'TestE2ESandbox$$' ./hack/e2e/

# Upgrades: an instance folder made by an earlier vmdock (a fixed commit,
# built into bin/ in a git worktree; VMDOCK_UPGRADE_FROM=<commit> picks
# another) started under this one.
e2e-upgrade: $(E2E_PREREQS)
	VMDOCK_E2E_UPGRADE=1 $(GO) test -count=1 -tags e2e -v -timeout 45m -run 'TestE2EUpgrade$$' ./hack/e2e/

# What e2e-arm64 makes first: qemu-system-aarch64 (deps-arm64), the binary
# and the arm64 image. E2E_PREREQS= empties it too (.ci/run installed,
# built and made all three before).
E2E_ARM64_PREREQS ?= $(if $(E2E_PREREQS),deps-arm64 build image-arm64)

deps-arm64:
	bash hack/deps.sh arm64

# The Apple Silicon guest (arm64 image, arm64 agent) booted under
# qemu-system-aarch64: about 3 minutes to docker-ready under TCG on an x86
# machine, so it has its own test with one boot.
e2e-arm64: $(E2E_ARM64_PREREQS)
	VMDOCK_E2E_ARM64=1 $(GO) test -count=1 -tags e2e -v -timeout 90m -run 'TestE2EArm64$$' ./hack/e2e/

# Boots a throwaway isolated instance, runs `vmdock bench`, stops it.
# BENCH_FULL=1 for full-size workloads. Its remote step is bench-remote.
bench: build
	bash hack/bench/run.sh

# `vmdock bench --sections remote` against a remote instance on real parts
# and no VM: Debian's openssh-server and docker.io's dockerd in a network
# namespace (198.18.0.2) the test makes, the laptop in another (root).
# VMDOCK_REMOTE_BENCH_OUT=DIR: the table to DIR/remote.txt, the rows added
# to DIR/bench.json.
bench-remote: build
	VMDOCK_REMOTE_BENCH=1 $(GO) test -count=1 -timeout 30m -v -run '^TestRemoteBench$$' ./hack/remotetest/

demo:
	bash hack/demo.sh

clean:
	rm -rf bin $(AGENTS)
