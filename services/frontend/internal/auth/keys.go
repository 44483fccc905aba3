package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Entry is one accepted API key: its SHA-256 (the key itself is never
// kept), a name for logs, whether it holds the admin role, and its own
// limits, whose unset fields take the Guard's defaults.
type Entry struct {
	ID     [32]byte
	Name   string
	Admin  bool
	Limits Limits
	// set marks the fields of Limits the entry gave.
	set limitFields
}

type limitFields struct{ rps, burst, tpm, concurrent bool }

// limits is e's limits over defaults.
func (e Entry) limits(d Limits) Limits {
	l := d
	if e.set.rps {
		l.RequestsPerSecond = e.Limits.RequestsPerSecond
	}
	if e.set.burst {
		l.RequestBurst = e.Limits.RequestBurst
	}
	if e.set.tpm {
		l.TokensPerMinute = e.Limits.TokensPerMinute
	}
	if e.set.concurrent {
		l.Concurrent = e.Limits.Concurrent
	}
	return l
}

// ParseEntry reads one line of a keys file:
//
//	KEY-OR-HASH [name=NAME] [rps=N] [burst=N] [tpm=N] [concurrency=N] [admin]
//
// The key is given as "sha256:" and the 64 hex digits of its SHA-256
// (printf %s "$KEY" | sha256sum), so the file need not hold secrets, or
// as the key itself. rps is requests per second (with burst, the bucket's
// size), tpm prompt plus completion tokens per minute, concurrency the
// requests in flight at once; 0 is unlimited.
func ParseEntry(line string) (Entry, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return Entry{}, fmt.Errorf("empty entry")
	}
	var e Entry
	if h, ok := strings.CutPrefix(f[0], "sha256:"); ok {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 32 {
			return Entry{}, fmt.Errorf("%q: want sha256: and 64 hex digits", f[0])
		}
		copy(e.ID[:], b)
	} else {
		e.ID = sha256.Sum256([]byte(f[0]))
	}
	e.Name = hex.EncodeToString(e.ID[:4])
	for _, a := range f[1:] {
		if a == "admin" {
			e.Admin = true
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return Entry{}, fmt.Errorf("%q: want name=value or admin", a)
		}
		num := func() (float64, error) {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || n < 0 || n != n {
				return 0, fmt.Errorf("%s=%q: want a number >= 0", k, v)
			}
			return n, nil
		}
		var err error
		var n float64
		switch k {
		case "name":
			if v == "" {
				return Entry{}, fmt.Errorf("name=: empty")
			}
			e.Name = v
		case "rps":
			n, err = num()
			e.Limits.RequestsPerSecond, e.set.rps = n, true
		case "burst":
			n, err = num()
			e.Limits.RequestBurst, e.set.burst = int(n), true
		case "tpm":
			n, err = num()
			e.Limits.TokensPerMinute, e.set.tpm = n, true
		case "concurrency":
			n, err = num()
			e.Limits.Concurrent, e.set.concurrent = int(n), true
		default:
			return Entry{}, fmt.Errorf("%q: unknown attribute (want name, rps, burst, tpm, concurrency or admin)", k)
		}
		if err != nil {
			return Entry{}, err
		}
	}
	return e, nil
}

// LoadEntries reads a keys file (one ParseEntry line each; blank lines
// and lines starting with # are skipped) and a comma-separated list of
// entries (an environment variable). admin gives every entry the admin
// role. Either may be empty; a file without entries is an error.
func LoadEntries(path, list string, admin bool) ([]Entry, error) {
	var out []Entry
	for item := range strings.SplitSeq(list, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		e, err := ParseEntry(item)
		if err != nil {
			return nil, fmt.Errorf("api keys list: %w", err)
		}
		e.Admin = e.Admin || admin
		out = append(out, e)
	}
	if path == "" {
		return out, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("api keys: %w", err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		e, err := ParseEntry(s)
		if err != nil {
			return nil, fmt.Errorf("api keys %s:%d: %w", path, line, err)
		}
		e.Admin = e.Admin || admin
		out = append(out, e)
		n++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("api keys %s: %w", path, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("api keys %s: no keys in file", path)
	}
	return out, nil
}
