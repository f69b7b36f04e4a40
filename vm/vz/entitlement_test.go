package vz

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// nsErrorText is how vz v3.7.1 prints the NSError an unsigned binary gets
// from configuration validation (NSError.Error in vz's cgoutil.go; the
// reason as reported in pyobjc#434 and traderepublic/Cilicon#84).
const nsErrorText = `Error Domain=VZErrorDomain Code=2 Description="Invalid virtual machine configuration. The process doesn’t have the “com.apple.security.virtualization” entitlement." UserInfo={NSLocalizedFailure=Invalid virtual machine configuration., NSLocalizedFailureReason=The process doesn’t have the “com.apple.security.virtualization” entitlement.}`

func TestExplainMissingEntitlement(t *testing.T) {
	vzErr := errors.New(nsErrorText)
	got := explainMissingEntitlement(fmt.Errorf("vz: configuration rejected: %w", vzErr))
	msg := got.Error()
	for _, want := range []string{"codesign", "hack/vz.entitlements", "com.apple.security.virtualization", "make"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") || strings.Contains(msg, "UserInfo") {
		t.Errorf("not one clean line: %q", msg)
	}
	if !errors.Is(got, vzErr) {
		t.Error("the original vz error is no longer reachable with errors.Is")
	}
}

func TestExplainMissingEntitlementPassesOthers(t *testing.T) {
	if explainMissingEntitlement(nil) != nil {
		t.Error("nil became an error")
	}
	other := errors.New(`Error Domain=VZErrorDomain Code=2 Description="Invalid virtual machine configuration." UserInfo={NSLocalizedFailureReason=The storage device attachment is invalid.}`)
	if got := explainMissingEntitlement(other); got != other {
		t.Errorf("unrelated error rewritten: %v", got)
	}
}

// Where Virtualization.framework refuses an unsigned binary at start or
// restore, the machine's error is the fix, not vz's NSError dump.
func TestStartAndRestoreExplainMissingEntitlement(t *testing.T) {
	for name, run := range map[string]func(*fakeVZ) error{
		"start": func(f *fakeVZ) error {
			f.startErr = errors.New(nsErrorText)
			_, err := bootMachine(f, testConfig())
			return err
		},
		"restore": func(f *fakeVZ) error {
			f.restoreErr = errors.New(nsErrorText)
			_, err := resumeMachine(f, testConfig(), statePath(t))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := run(newFakeVZ())
			var me missingEntitlementError
			if !errors.As(err, &me) {
				t.Fatalf("error = %v; want the missing entitlement explained", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "codesign") || strings.Contains(msg, "UserInfo") {
				t.Errorf("error = %q; want the codesign fix alone", msg)
			}
		})
	}
}
