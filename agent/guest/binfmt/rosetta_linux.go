package binfmt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos"
)

const (
	rosettaDir = "/mnt/rosetta"

	// binfmtConfDir is one of the folders systemd-binfmt reads each time it
	// (re)starts, right after it has flushed every registration. /run and
	// not /usr/lib: the file exists only once the Rosetta share is
	// mounted, so systemd-binfmt at early boot does not fail (and leave
	// the system degraded) on an interpreter that F must open but cannot
	// find yet. The agent writes it again on every boot.
	binfmtConfDir = "/run/binfmt.d"

	// rosettaBinfmtConf sorts after qemu-x86_64.conf and every other
	// qemu-*.conf: systemd-binfmt registers files in name order, whatever
	// their folder, and binfmt_misc tries the newest registration first
	// (fs/binfmt_misc.c adds each entry at the head of the list and
	// check_file walks it from the head). Last registered wins.
	rosettaBinfmtConf = "zz-vmdock-rosetta.conf"

	// rosettadUnit runs rosettad, Rosetta's translation cache. It must run
	// from the share itself (a copy is refused) in the guest's own
	// namespaces, and serves only when the host set caching options (vz
	// on macOS 14+, where the share also ships rosettad).
	rosettadUnit  = "vmdock-rosettad.service"
	rosettadCache = "/var/cache/rosettad"
)

// EnableRosetta mounts the share, registers Rosetta for x86_64 binaries ahead of
// any qemu-user registration, keeps that true across a systemd-binfmt
// restart, and starts the translation cache when the share has one.
func (s *Handlers) EnableRosetta(ctx context.Context) error {
	if err := s.MountOnce(ctx, rosettaDir, "-t", "virtiofs", agent.RosettaTag, rosettaDir); err != nil {
		return err
	}
	if err := s.MountOnce(ctx, binfmtMisc, "-t", "binfmt_misc", "binfmt_misc", binfmtMisc); err != nil {
		return err
	}
	rule := rosettaRule()
	if err := os.MkdirAll(s.Path(binfmtConfDir), 0o755); err != nil {
		return fmt.Errorf("binfmt.d: %w", err)
	}
	if err := guestos.WriteFile(s.Path(filepath.Join(binfmtConfDir, rosettaBinfmtConf)), rule.confFile(), 0o644); err != nil {
		return fmt.Errorf("binfmt.d: %w", err)
	}
	if err := s.registerFirst(rule); err != nil {
		return err
	}
	s.startRosettad(ctx)
	return nil
}

// registerFirst registers rule unless it already is and nothing else
// claims its files; with a rival (qemu-x86_64 registered since, say by
// installing qemu-user-static) it registers rule again, so it is newest.
func (s *Handlers) registerFirst(rule binfmtRule) error {
	entry := s.Path(filepath.Join(binfmtMisc, rule.Name))
	if _, err := os.Stat(entry); err == nil {
		rival, err := s.binfmtRival(rule)
		if err != nil || rival == "" {
			return err
		}
		s.Logger().Info("re-registering so it is tried before a rival", "binfmt", rule.Name, "rival", rival)
		if err := os.WriteFile(entry, []byte("-1"), 0o200); err != nil {
			return fmt.Errorf("unregister %s: %w", rule.Name, err)
		}
	}
	if err := os.WriteFile(s.Path(binfmtMisc+"/register"), []byte(rule.line()), 0o200); err != nil {
		return fmt.Errorf("register %s: %w", rule.Name, err)
	}
	return nil
}

// binfmtRival names another enabled registration that takes rule's files.
func (s *Handlers) binfmtRival(rule binfmtRule) (string, error) {
	ents, err := os.ReadDir(s.Path(binfmtMisc))
	if err != nil {
		return "", fmt.Errorf("list binfmt_misc: %w", err)
	}
	for _, de := range ents {
		switch de.Name() {
		case rule.Name, "register", "status":
			continue
		}
		b, err := os.ReadFile(s.Path(filepath.Join(binfmtMisc, de.Name())))
		if err != nil {
			continue // unregistered meanwhile
		}
		if e, err := parseBinfmtEntry(string(b)); err == nil && e.claims(rule.Magic) {
			return de.Name(), nil
		}
	}
	return "", nil
}

// startRosettad starts the cache daemon once per boot. Rosetta runs
// without it, only slower the second time, so a failure is logged, not
// returned.
func (s *Handlers) startRosettad(ctx context.Context) {
	bin := rosettaDir + "/rosettad"
	if _, err := os.Stat(s.Path(bin)); errors.Is(err, os.ErrNotExist) {
		return // macOS 13's Rosetta has no cache
	}
	if _, err := s.OS.Run(ctx, "systemctl", "is-active", "--quiet", rosettadUnit); err == nil {
		return
	}
	// --collect drops the unit if it fails, so a host without caching
	// options does not leave a failed unit behind.
	if _, err := s.OS.Run(ctx, "systemd-run", "--unit", rosettadUnit, "--collect",
		"--property", "CacheDirectory="+filepath.Base(rosettadCache),
		bin, "daemon", rosettadCache); err != nil {
		s.Logger().Warn("rosettad not started: amd64 binaries run uncached", "err", err)
	}
}
