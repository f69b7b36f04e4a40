package vz

import "sort"

// VZEnum is one case of a Virtualization.framework enum as
// github.com/Code-Hex/vz/v3 spells it: the constant's name and its value.
// The plan's tables below say which case each of our modes means;
// configure_darwin.go only converts Value to the vz type, so it cannot
// swap two cases, plan_test.go pins the names and hack/darwincheck holds
// every Name to its Value in vz's source.
type VZEnum struct {
	Name  string
	Value int64
}

// vzPackage is where every VZEnum constant lives.
const vzPackage = "github.com/Code-Hex/vz/v3"

// cachingModes maps each CachingMode onto vz.DiskImageCachingMode.
var cachingModes = map[CachingMode]VZEnum{
	CachingCached: {"DiskImageCachingModeCached", 2},
}

// syncModes maps each SyncMode onto vz.DiskImageSynchronizationMode.
var syncModes = map[SyncMode]VZEnum{
	SyncFull:  {"DiskImageSynchronizationModeFull", 1},
	SyncFsync: {"DiskImageSynchronizationModeFsync", 2},
	SyncNone:  {"DiskImageSynchronizationModeNone", 3},
}

// VZEnumCases lists every vz constant the plan maps onto, for
// hack/darwincheck; the package is always vz/v3.
func VZEnumCases() (pkg string, cases []VZEnum) {
	for _, c := range cachingModes {
		cases = append(cases, c)
	}
	for _, s := range syncModes {
		cases = append(cases, s)
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Name < cases[j].Name })
	return vzPackage, cases
}
