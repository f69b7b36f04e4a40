// Package store is where instances live on disk: the vmdock home, one
// folder per profile holding every file vmdock and its drivers keep (each
// with its path method on Instance), the profile lock, and the instance's
// live state (Running, Stopped, Broken ...) derived from its host agent's
// pid file and control socket.
package store
