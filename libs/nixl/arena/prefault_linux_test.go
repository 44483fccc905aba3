package arena

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// After Prefault every page of the arena is resident.
func TestPrefaultResident(t *testing.T) {
	t.Parallel()
	a, err := Map(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	resident := func() int {
		vec := make([]byte, (len(a.Bytes())+pageSize-1)/pageSize)
		mem := a.Bytes()
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		return n
	}
	if n := resident(); n == len(a.Bytes())/pageSize {
		t.Skip("a fresh mapping is resident already (pre-zeroed huge pages?): nothing to check")
	}
	a.Prefault()
	if n, want := resident(), len(a.Bytes())/pageSize; n != want {
		t.Fatalf("%d of %d pages resident after Prefault", n, want)
	}
}
