package app

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag of bytes with an optional binary or decimal unit:
// 1073741824, 1GiB, 500GB, 64MiB.
type byteSize int64

var units = []struct {
	suffix string
	mult   int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
}

func (b *byteSize) Set(s string) error {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("bad size %q: want a non-negative whole number of bytes, optionally with a unit (KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s)
	}
	*b = byteSize(n * mult)
	return nil
}

func (b byteSize) String() string {
	for _, u := range units {
		if u.mult > 1 && b > 0 && int64(b)%u.mult == 0 {
			return strconv.FormatInt(int64(b)/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10)
}
