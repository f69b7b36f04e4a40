package remotehelper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/mounts/syncmount"
	"github.com/vmdock/vmdock/mounts/watch"
)

// On a server the sync copy of a mount is the folder at the mount's own
// path, not a copy bound there as in a VM: no root, no bind mounts, and
// the server's engine binds that path into containers. The helper keeps
// the sync engine's state beside its own binary, one folder per instance
// (so two laptops syncing to one server never share it), and a claim per
// folder it took: the folders it made or found empty. A folder with files
// vmdock never synced is refused, not merged: two-way-safe would copy the
// server's files into the laptop's folder and keep every differing file
// as a conflict.

// SyncKeyPattern is the accepted --sync-key: the instance's name on the
// server, a folder name.
var SyncKeyPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,99}$`)

// syncState is one instance's sync state on the server: Mutagen's data
// folder and the claims.
type syncState struct {
	dir   string // <cache>/sync/<key>
	cache string // vmdock's folder on the server: never synced
}

// SyncDir is where the sync state of the instance key lives under cache,
// vmdock's folder on the server (~/.cache/vmdock).
func SyncDir(cache, key string) string { return filepath.Join(cache, "sync", key) }

func (s *syncState) mutagenDir() string { return filepath.Join(s.dir, "mutagen") }

func (s *syncState) claimPath(id string) string { return filepath.Join(s.dir, "claims", id) }

// claimed is the folder the claim of id names; "" when there is none.
func (s *syncState) claimed(id string) string {
	b, err := os.ReadFile(s.claimPath(id))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// claimFolder readies dir as the server's copy of sync mount id: made
// when missing, taken when empty or when this instance synced it before,
// refused otherwise. Nothing is deleted or moved.
func (s *syncState) claimFolder(id, dir string, mkdir func(string, fs.FileMode) error) error {
	if err := s.checkPlace(id, dir); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := mkdir(dir, syncmount.DefaultDirMode); err != nil {
			return cannotCreate(dir, err)
		}
	case err != nil:
		return fmt.Errorf("the server's folder %s: %w", dir, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(dir)
		return fmt.Errorf("the server's %s is a symbolic link (to %s); vmdock syncs into a real folder: sync to the link's target instead (-V PATH:%s, or mountPoint: in the mount)", dir, target, target)
	case !fi.IsDir():
		return fmt.Errorf("the server's %s is a file, not a folder; move it aside on the server, or sync to another folder (-V PATH:/other/folder, or mountPoint: in the mount)", dir)
	case s.claimed(id) != dir:
		empty, err := isEmpty(dir)
		if err != nil {
			return fmt.Errorf("the server's folder %s: %w", dir, err)
		}
		if !empty {
			return fmt.Errorf("the server's folder %s already holds files vmdock did not sync there; nothing was changed: move it aside on the server (mv %s %s.old), or sync to another folder (-V PATH:/other/folder, or mountPoint: in the mount)", dir, dir, dir)
		}
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		u := sshUser()
		return fmt.Errorf("the SSH user %s may not write the server's folder %s (%v); run there: sudo chown -R %s: %s", u, dir, err, u, dir)
	}
	if err := os.MkdirAll(filepath.Dir(s.claimPath(id)), 0o700); err != nil {
		return fmt.Errorf("vmdock's sync state on the server: %w", err)
	}
	return atomicfile.WriteFile(s.claimPath(id), []byte(dir+"\n"), 0o600)
}

// checkPlace refuses what could never be a copy: a bad id, a path that is
// not absolute and clean, the root, and vmdock's own folder or one that
// holds it (the helper and the sync engine's state would be synced).
func (s *syncState) checkPlace(id, dir string) error {
	if !syncmount.IDPattern.MatchString(id) {
		return fmt.Errorf("sync mount id %q is not accepted; accepted: %s", id, syncmount.IDPattern)
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || dir == "/" {
		return fmt.Errorf("the server's folder %q is not accepted; accepted: an absolute clean path below /", dir)
	}
	if within(dir, s.cache) || within(s.cache, dir) {
		return fmt.Errorf("the server's folder %s is or holds vmdock's own folder %s; sync to another folder (-V PATH:/other/folder, or mountPoint: in the mount)", dir, s.cache)
	}
	return nil
}

// cannotCreate says how to make dir by hand when the SSH user may not.
func cannotCreate(dir string, err error) error {
	if errors.Is(err, fs.ErrPermission) {
		u := sshUser()
		return fmt.Errorf("the SSH user %s may not create the server's folder %s (%v); run there: sudo mkdir -p %s && sudo chown %s: %s", u, dir, err, dir, u, dir)
	}
	return fmt.Errorf("cannot create the server's folder %s (%v); create it there by hand, or sync to another folder (-V PATH:/other/folder)", dir, err)
}

// sshUser names the helper's user for the commands an error suggests.
func sshUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return fmt.Sprint(os.Getuid())
}

func isEmpty(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

// within reports whether p is parent or inside it (both clean, absolute).
func within(p, parent string) bool {
	rel, err := filepath.Rel(parent, p)
	return err == nil && filepath.IsLocal(rel) || p == parent
}

// prepareSync answers a sync mount's mount request: on a server, the
// folder at Target is claimed as the copy.
func (h *helper) prepareSync(st net.Conn, req agent.Request) {
	m := req.Mount
	switch {
	case h.sync == nil:
		_ = agent.Reply(st, errors.New("this helper keeps no sync state (started without --sync-key)"))
	case m == nil || m.Type != agent.MountTypeSync:
		_ = agent.Reply(st, errors.New("a remote server takes sync mounts only"))
	default:
		err := h.sync.claimFolder(m.Tag, m.Target, os.MkdirAll)
		if err == nil {
			h.log.Info("sync folder ready", "id", m.Tag, "folder", m.Target, "laptop", m.HostPath)
		}
		_ = agent.Reply(st, err)
	}
}

// serveSync answers an OpSync stream: after the OK, the stream belongs to
// the sync engine's endpoint server until the host closes it.
func (h *helper) serveSync(ctx context.Context, st net.Conn) {
	if h.sync == nil {
		_ = agent.Reply(st, errors.New("this helper keeps no sync state (started without --sync-key)"))
		st.Close()
		return
	}
	if err := agent.Reply(st, nil); err != nil {
		st.Close()
		return
	}
	if err := syncmount.Serve(ctx, st, syncmount.GuestOptions{DataDir: h.sync.mutagenDir(), Logger: h.log.With("service", "sync")}); err != nil {
		h.log.Info("sync stream ended", "err", err)
	}
}

// watchSync reports changes in the claimed folders of the mounts the host
// names, as a VM's guest agent does for its copies.
func (h *helper) watchSync(ctx context.Context, st net.Conn, req agent.Request) {
	trees, err := h.syncTrees(req.SyncWatch)
	if err != nil {
		_ = agent.Reply(st, err)
		st.Close()
		return
	}
	agent.ServeSyncWatch(ctx, st, trees, h.log.With("service", "sync-watch"))
}

// syncTrees are the claimed folders of the mounts in sw.
func (h *helper) syncTrees(sw *agent.SyncWatch) ([]watch.Tree, error) {
	if h.sync == nil {
		return nil, errors.New("this helper keeps no sync state (started without --sync-key)")
	}
	if sw == nil {
		return nil, errors.New("sync-watch request without mounts")
	}
	var trees []watch.Tree
	for _, m := range sw.Mounts {
		dir := ""
		if syncmount.IDPattern.MatchString(m.ID) {
			dir = h.sync.claimed(m.ID)
		}
		if dir == "" {
			return nil, fmt.Errorf("sync-watch: mount %q has no folder on this server (its mount request comes first)", m.ID)
		}
		for _, ex := range m.Exclude {
			if !filepath.IsLocal(ex) {
				return nil, fmt.Errorf("sync-watch %s: exclude %q is not accepted; accepted: a clean path inside the mount", m.ID, ex)
			}
		}
		trees = append(trees, watch.Tree{ID: m.ID, Dir: dir, Exclude: m.Exclude})
	}
	return trees, nil
}
