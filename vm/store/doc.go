// Package store is where instances live on disk: the vmdock home, one
// folder per profile holding every file vmdock and its drivers keep (each
// with its path method on Instance), the profile lock, and reading those
// files (ReadPID; LoadConfig, the one way to read an instance's config). The instance's live state (Running, Stopped, Broken ...),
// which asks its host agent, is package vm/instance's Status.
package store
