package quickjs

import (
	"syscall"
	"unsafe"
)

// residentPages sets vec[i] to whether page i of b (page-aligned) is
// resident. A page that is not was never touched since it was mapped, so
// it reads as zero and needs no reset. It reports false when it cannot
// tell, and the caller treats every page as resident.
func residentPages(b []byte, vec []byte) bool {
	if len(b) == 0 || len(vec) < (len(b)+pageSize-1)/pageSize {
		return len(b) == 0
	}
	_, _, errno := syscall.Syscall(syscall.SYS_MINCORE,
		uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if errno != 0 {
		return false
	}
	for i := range vec {
		vec[i] &= 1
	}
	return true
}
