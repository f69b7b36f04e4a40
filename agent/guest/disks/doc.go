// Package disks keeps the guest's disks: the data disk that holds images
// and volumes (found by its link, formatted once, mounted, grown with its
// disk), the root's growth, a reserve that keeps a full disk workable,
// and the upkeep that trims freed blocks and reclaims cold page cache.
package disks
