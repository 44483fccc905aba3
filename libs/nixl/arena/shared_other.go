//go:build !linux

package arena

import (
	"errors"
	"os"
)

var errNoMemfd = errors.New("shared arenas need Linux (memfd)")

func mapShared(int) (*Arena, error) { return nil, errNoMemfd }

// MapFile maps a memory file another process shared; Linux only.
func MapFile(*os.File, int) (*Arena, error) { return nil, errNoMemfd }
