package vz

import "strings"

// virtualizationEntitlement is what Virtualization.framework requires of
// the process. Without it, validating the configuration fails with
// VZErrorDomain code 2 (invalid configuration), reason "The process
// doesn't have the "com.apple.security.virtualization" entitlement." The
// reason is localized but the entitlement's name stays verbatim, so it is
// what we match.
const virtualizationEntitlement = "com.apple.security.virtualization"

// missingEntitlementError replaces vz's multi-part NSError text with the
// one fix that applies, keeping the original for errors.As.
type missingEntitlementError struct{ cause error }

func (e missingEntitlementError) Error() string {
	return "vz: this vmdock binary is not signed with the " + virtualizationEntitlement +
		" entitlement (built with `go install`?); sign it with `codesign --entitlements hack/vz.entitlements --force -s - " +
		"\"$(command -v vmdock)\"` from a vmdock checkout, or build with `make`"
}

func (e missingEntitlementError) Unwrap() error { return e.cause }

// explainMissingEntitlement turns vz's error for an unsigned binary into
// the one-line fix, and passes every other error through untouched.
func explainMissingEntitlement(err error) error {
	if err == nil || !strings.Contains(err.Error(), virtualizationEntitlement) {
		return err
	}
	return missingEntitlementError{cause: err}
}
