package disks

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReserveKeptWithRoomAndReleasedWhenFull(t *testing.T) {
	s, _ := newTestServer(t)
	must(t, os.MkdirAll(s.Path(DataMount), 0o755))
	defer func(f func(string) (int64, error), n int64) { diskFree, reserveSize = f, n }(diskFree, reserveSize)
	reserveSize = 1 << 20
	free := int64(100 << 20)
	diskFree = func(string) (int64, error) { return free, nil }

	must(t, s.keepReserve())
	st, err := os.Stat(filepath.Join(s.Root, DataMount, reserveName))
	if err != nil || st.Size() != reserveSize {
		t.Fatalf("reserve after keepReserve: %v, %v", st, err)
	}
	if released, err := s.ReleaseReserveIfFull(); released || err != nil {
		t.Fatalf("released with room to spare: %v, %v", released, err)
	}

	free = 4096 // a container filled the disk
	if released, err := s.ReleaseReserveIfFull(); !released || err != nil {
		t.Fatalf("full disk: released %v, %v; want the reserve given back", released, err)
	}
	if _, err := os.Stat(s.reservePath()); !os.IsNotExist(err) {
		t.Fatalf("reserve still there on a full disk: %v", err)
	}
	must(t, s.keepReserve()) // still full: nothing taken back
	if _, err := os.Stat(s.reservePath()); !os.IsNotExist(err) {
		t.Fatal("reserve taken back while the disk is full")
	}
	free = 100 << 20 // the user freed space; the next boot takes it back
	must(t, s.keepReserve())
	if _, err := os.Stat(s.reservePath()); err != nil {
		t.Fatalf("reserve not taken back once there is room: %v", err)
	}
}

// Before the data disk is mounted there is no folder to measure: nothing
// is released, and the error says why.
func TestReleaseReserveWithoutTheDataDisk(t *testing.T) {
	s, _ := newTestServer(t)
	if released, err := s.ReleaseReserveIfFull(); released || err == nil {
		t.Fatalf("released %v, %v; want nothing released and the statfs error", released, err)
	}
}
