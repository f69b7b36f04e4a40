// Package review compares a sandbox's workspace on the host with the
// guest's copy, where a coding agent's edits stay until the user accepts
// them: it shows the agent's changes as a unified diff, writes the ones
// accepted into the host folder (never through a symlink, never over a
// file the host changed meanwhile) and puts the host's version back in the
// guest for the ones rejected.
//
// Each side is summed per path (a file's content and executable bit, a
// symlink's target); a base, saved in the instance folder, is what both
// sides last agreed on. A path whose guest side differs from the base
// while the host's does not is the agent's change; one where both moved
// is a conflict; one where only the host moved is the host's change on its
// way in (the sync carries it), not the agent's.
package review
