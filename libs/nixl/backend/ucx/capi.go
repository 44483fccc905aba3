//go:build ucx && cgo

package ucx

/*
#cgo pkg-config: ucx
#include "nx.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// status is a UCX status code.
type status C.ucs_status_t

const (
	statusOK         = status(C.UCS_OK)
	statusInProgress = status(C.UCS_INPROGRESS)
)

func (s status) err() error {
	if s == statusOK {
		return nil
	}
	return fmt.Errorf("ucx: %s", C.GoString(C.ucs_status_string(C.ucs_status_t(s))))
}

// request is an outstanding UCX request, owned by the progress goroutine.
type request unsafe.Pointer
