// Package maketest holds the tests of the Makefile's targets that a user
// runs by hand (install) and of what the e2e targets make first, run
// against a copy of the Makefile in a temp folder so they never touch the
// checkout's bin/.
package maketest
