package hostagent

// softFileLimit is the hard limit itself. The Go runtime raises it at start
// on Linux too; doing it here keeps the host agent right whatever runtime
// builds it, and logs what it got.
func softFileLimit(hard uint64) uint64 { return hard }
