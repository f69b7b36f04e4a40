// Package guestostest fakes the guest system for the guest features' tests.
package guestostest
