// Package syncmount keeps a copy of a host folder inside the guest and syncs
// it both ways, using Mutagen's synchronization core as a library. It is the
// only vmdock package that imports Mutagen (pinned to v0.18.1, MIT packages
// only; license_test.go enforces that).
//
// Two halves run in two processes:
//
//   - Guest: the guest agent calls Serve for every sync stream the host opens.
//     Serve runs Mutagen's remote endpoint server, which owns the guest copy
//     (beta). A remote instance's helper (agent/remotehelper) does the same
//     on a server, where the copy is the folder at the mount's own path.
//   - Host: the host agent creates one Manager per instance. The Manager runs
//     Mutagen's session manager; the host folder is the local alpha endpoint,
//     the guest copy is reached through Options.Dial, one new stream per
//     endpoint connection.
//
// # Wiring
//
// Guest agent: for a stream whose request selects the sync service, reply OK
// and call Serve(ctx, stream, GuestOptions{DataDir: GuestDataDir}); nothing
// may read ahead of the stream after the request line (our preamble and
// Mutagen's handshake follow at once). Before bind-mounting a copy, create it
// with PrepareGuestCopy. The agent must run as root for the ownership of
// Mount.UID/GID to apply.
//
// Host agent: NewManager(Options{DataDir: <instance>/sync, Dial: ...}) once
// the agent session is up, where Dial opens a stream, sends the sync request
// and returns the stream after the guest's OK. Then Ensure each sync mount,
// Prune the rest, WaitInitial with a progress line; Reconnect after a new
// agent session; Flush on the guest's change events; FlushAll before
// poweroff; Status for `status` and `vmdock sync status`; Close on exit.
//
// # Process-wide data directory
//
// Mutagen reads MUTAGEN_DATA_DIRECTORY from the environment on every access,
// so it is a process-wide setting. NewManager and Serve set it from their
// options before their first Mutagen call, and refuse a different directory
// while another Manager or Serve in the same process still uses one. Do not
// set or change the variable elsewhere.
//
// # Finding changes
//
// Mutagen's own watch on Linux (without its SSPL parts) is a full scan of
// the side every poll period. vmdock watches the guest copies and Linux
// host folders itself (package watch) and calls Flush, so a side marked
// in Options.HostWatched/GuestWatched is set to Mutagen's no-watch mode:
// it is scanned on a Flush, on connecting, and by the Manager's backstop
// rescan (Options.Backstop, 10 s, or 20 times as long as the last rescan
// took) that catches what a watcher missed.
//
// # Synchronization mode
//
// Sessions use two-way-safe: changes flow both ways, and when both sides
// changed the same path since the last sync, Mutagen leaves both contents in
// place (the host keeps its version, the guest copy keeps its version) and
// reports a conflict until one side is changed to match. two-way-resolved
// would let the host silently overwrite what a container wrote, and the
// one-way modes do not carry container writes back to the host, so neither
// fits "never lose data".
//
// # Root emptied or deleted
//
// A new data disk or `delete --data` leaves the guest copy empty or missing.
// Mutagen then halts the session (HaltedOnRootEmptied/HaltedOnRootDeletion)
// instead of deleting the host files. The Manager notices a halt where the
// guest side is the one that went empty or missing, and resets the session's
// history: with no common ancestor, two-way-safe only creates files, so the
// host contents refill the guest copy and nothing is deleted on the host. A
// halt where the host side went empty is left halted and reported, because
// then the guest copy is the only full copy.
//
// Mutagen only detects "emptied" when the last synced root held at least two
// entries, and not at all once a container wrote into the fresh copy. So
// before Mutagen's handshake, host and guest exchange one line (see
// preamble.go): the guest says whether its data directory (on the same disk
// as the copies) has served the session before. A guest that has not, facing
// a host with sync history, gets the same reset as above. An rm -rf inside a
// running container is an ordinary deletion and is synced as one.
//
// # Atomic replacement
//
// Mutagen writes a changed file to a staging file and renames it into place,
// so every update has a new inode. A container that bind-mounts a single file
// out of a sync mount keeps seeing the old inode, that is stale content.
package syncmount
