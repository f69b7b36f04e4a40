// Package doctor checks what a vmdock start depends on, host by host, and
// says for each thing ok, warn or fail with one line of why and one of
// what to do: `vmdock doctor` prints it so a user's first problem comes
// back to us in one paste.
//
// Every check is a plain function of Facts; Facts holds what was detected
// and the probes, so tests describe a Mac on any host.
package doctor
