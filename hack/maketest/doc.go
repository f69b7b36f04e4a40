// Package maketest holds the tests of the Makefile's targets that a user
// runs by hand (install), run against a copy of the Makefile in a temp
// folder so they never touch the checkout's bin/. It also checks what the
// e2e targets make first, and that E2E_PREREQS= skips it.
package maketest
