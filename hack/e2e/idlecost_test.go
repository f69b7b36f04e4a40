//go:build e2e

package e2e

import (
	"encoding/json"
	"testing"
	"time"
)

// hostCost is the part of `vmdock status --json` the idle cost checks read.
type hostCost struct {
	VMResidentBytes       int64 `json:"vmResidentBytes"`
	GuestRAMResidentBytes int64 `json:"guestRamResidentBytes"`
	Disks                 []struct {
		Name           string `json:"name"`
		AllocatedBytes int64  `json:"allocatedBytes"`
	} `json:"disks"`
}

func (c hostCost) ram() int64 {
	if c.GuestRAMResidentBytes > 0 {
		return c.GuestRAMResidentBytes
	}
	return c.VMResidentBytes
}

func (c hostCost) disk(name string) int64 {
	for _, d := range c.Disks {
		if d.Name == name {
			return d.AllocatedBytes
		}
	}
	return -1
}

func (e *env) cost(t *testing.T) hostCost {
	t.Helper()
	var st struct {
		HostAgent struct {
			Cost *hostCost `json:"cost"`
		} `json:"hostAgent"`
	}
	out := e.run(time.Minute, e.vmdock, "status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.HostAgent.Cost == nil {
		t.Fatalf("status --json has no hostAgent.cost: %v\n%s", err, out)
	}
	return *st.HostAgent.Cost
}

const mib = 1 << 20

// checkIdleCost: 256 MiB a container touched come back to the
// host once it is gone (the balloon's free page reporting), and so do the
// data disk blocks of a removed 256 MiB volume (the guest agent's fstrim).
// Each fails only when its mechanism clearly did nothing; the figures are
// logged.
func checkIdleCost(t *testing.T, e *env) {
	const size = 256
	// Memory: a container fills a 256 MiB tmpfs, which its exit frees in
	// the guest at once.
	e.docker(3*time.Minute, "run", "-d", "--name", "mem", "--tmpfs", "/big:size=300m", "vmdock-test:latest",
		"/bin/busybox", "sh", "-c", "/bin/busybox dd if=/dev/zero of=/big/f bs=1M count=256 && touch /big/done && sleep 3600")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, _, err := e.try(time.Minute, "docker", "--context", "vmdock", "exec", "mem", "/bin/busybox", "test", "-f", "/big/done")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 256 MiB tmpfs was not filled within 3 minutes")
		}
		time.Sleep(2 * time.Second)
	}
	peak := e.cost(t).ram()
	e.docker(2*time.Minute, "rm", "-f", "mem")
	began := time.Now()
	after := peak
	for time.Since(began) < 30*time.Second {
		time.Sleep(3 * time.Second)
		if after = e.cost(t).ram(); peak-after >= size*mib*3/4 {
			break
		}
	}
	t.Logf("guest RAM resident: %d MiB with the 256 MiB container, %d MiB %.0f s after it exited (-%d MiB)",
		peak/mib, after/mib, time.Since(began).Seconds(), (peak-after)/mib)
	if peak-after < size*mib/4 {
		t.Errorf("guest RAM resident went from %d to %d MiB after a container with 256 MiB exited: free page reporting gave back less than a quarter", peak/mib, after/mib)
	}

	// Disk: a 256 MiB volume of non-zero data (zeros would not be
	// allocated at all: detect-zeroes=unmap), synced, then removed.
	e.docker(5*time.Minute, "run", "--rm", "-v", "bigvol:/v", "vmdock-test:latest",
		"/bin/busybox", "sh", "-c", "/bin/busybox yes vmdock-idle-cost | /bin/busybox head -c 268435456 > /v/f && /bin/busybox sync")
	e.run(time.Minute, e.vmdock, "ssh", "--", "sync")
	full := e.cost(t).disk("data")
	e.docker(2*time.Minute, "volume", "rm", "bigvol")
	began = time.Now()
	left := full
	for time.Since(began) < 150*time.Second {
		time.Sleep(5 * time.Second)
		if left = e.cost(t).disk("data"); full-left >= size*mib*9/10 {
			break
		}
	}
	t.Logf("data disk allocated: %d MiB with the 256 MiB volume, %d MiB %.0f s after docker volume rm (-%d MiB)",
		full/mib, left/mib, time.Since(began).Seconds(), (full-left)/mib)
	if full-left < size*mib/4 {
		t.Errorf("data disk allocation went from %d to %d MiB after a 256 MiB volume was removed: the guest's fstrim gave back less than a quarter", full/mib, left/mib)
	}
}
