// Package exec runs the commands the host asks for in the guest, with a
// terminal or pipes, relaying input, output, resizes and the exit code.
package exec
