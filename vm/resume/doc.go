// Package resume keeps a stopped instance's saved VM state and decides
// whether the next start may resume from it.
//
// A saved state is only safe to resume on exactly the VM it was taken
// from: the same guest agent and image, the same VM shape, and disks
// nobody touched since. Saved records a Fingerprint of all that; Decide
// compares it with the one a start computes, and any difference (or an
// unreadable or damaged state file) means a cold boot, with one line that
// says why. A cold boot is always safe because the guest's file systems
// were flushed before the save.
package resume
