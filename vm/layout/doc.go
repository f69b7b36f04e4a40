// Package layout versions an instance folder: the format record a folder
// carries, the refusal of a folder a newer vmdock made, and one migration
// step from each older format to the next, run under the profile lock
// before anything else writes to the folder.
//
// A step only adds the records an older vmdock left implicit, the way the
// current code would have read them; it never rewrites or removes the
// user's config or disks. A step that fails leaves the folder as it was:
// what the run added is taken away again.
package layout
