// Package metadata is the connection blob an agent publishes through
// discovery so that peers can reach it: its name, one address per backend,
// and its registered regions with the per-backend keys a peer needs to
// address them remotely.
//
// The encoding is a small versioned binary format (see README.md). Decode
// treats its input as hostile: every length is bounded before anything is
// allocated, and trailing bytes are an error, so a blob either decodes to a
// well-formed Agent or fails.
package metadata

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Version is the format version Encode writes. Decode also accepts
// version 1 (no epoch and generation; both read as 0).
const Version = 2

// magic starts every blob so a stray payload is rejected early.
var magic = [4]byte{'N', 'I', 'X', 'L'}

// Limits bound what Decode accepts.
const (
	MaxNameLen    = 255
	MaxBackends   = 16
	MaxAddrLen    = 64 << 10
	MaxRegions    = 1 << 20
	MaxKeysPerReg = MaxBackends
	MaxKeyLen     = 64 << 10
)

// ErrMalformed wraps every decoding failure.
var ErrMalformed = errors.New("metadata: malformed blob")

// Agent is the decoded form of one agent's metadata.
type Agent struct {
	Name string
	// Epoch names one run of the agent (random at start) and Gen counts
	// its registrations and deregistrations, so a peer that receives two
	// blobs of one run out of order keeps the newer (Newer).
	Epoch, Gen uint64
	Backends   []Backend
	Regions    []Region
}

// Newer reports whether a describes a later state of b's agent run than
// b does; blobs of different runs (or of version 1) are never ordered,
// and the one loaded last wins.
func (a *Agent) Newer(b *Agent) bool {
	return a.Epoch == b.Epoch && a.Epoch != 0 && a.Gen > b.Gen
}

// Backend is one transport the agent can be reached by.
type Backend struct {
	Name    string // "ucx", "tcp", "local"
	Address []byte // backend-specific: host:port, UCX worker address, ...
}

// Region is one registered memory region.
type Region struct {
	ID   uint32
	Len  uint64
	Keys []Key // remote keys, one per backend that needs one
}

// Key is the opaque remote key a backend produced for a region.
type Key struct {
	Backend string
	Key     []byte
}

// Backend returns the named backend's address, if advertised.
func (a *Agent) Backend(name string) ([]byte, bool) {
	for _, b := range a.Backends {
		if b.Name == name {
			return b.Address, true
		}
	}
	return nil, false
}

// Endpoints returns a digest of who the agent is and where it is
// reached: its name, its run's epoch and each backend's name and
// address (hex SHA-256, 64 characters), but not its regions, which change
// with every registration. An agent publishes it where peers can trust
// it (service discovery), and a peer handed a blob by anyone else checks
// that the blob's Endpoints match before it connects to the addresses in
// it.
func (a *Agent) Endpoints() string {
	h := sha256.New()
	var n [8]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	put([]byte(a.Name))
	binary.BigEndian.PutUint64(n[:], a.Epoch)
	h.Write(n[:])
	backends := slices.Clone(a.Backends)
	slices.SortFunc(backends, func(x, y Backend) int { return strings.Compare(x.Name, y.Name) })
	for _, b := range backends {
		put([]byte(b.Name))
		put(b.Address)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Region returns the region with the given id.
func (a *Agent) Region(id uint32) (*Region, bool) {
	for i := range a.Regions {
		if a.Regions[i].ID == id {
			return &a.Regions[i], true
		}
	}
	return nil, false
}

// Key returns the region's key for a backend (nil when it has none).
func (r *Region) Key(backend string) []byte {
	for _, k := range r.Keys {
		if k.Backend == backend {
			return k.Key
		}
	}
	return nil
}

// Encode serializes a. It fails on values Decode would reject.
func Encode(a *Agent) ([]byte, error) {
	if err := validate(a); err != nil {
		return nil, err
	}
	b := append([]byte(nil), magic[:]...)
	b = append(b, Version)
	b = appendStr8(b, a.Name)
	b = binary.BigEndian.AppendUint64(b, a.Epoch)
	b = binary.BigEndian.AppendUint64(b, a.Gen)
	b = append(b, byte(len(a.Backends)))
	for _, be := range a.Backends {
		b = appendStr8(b, be.Name)
		b = appendBytes32(b, be.Address)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(a.Regions)))
	for _, r := range a.Regions {
		b = binary.BigEndian.AppendUint32(b, r.ID)
		b = binary.BigEndian.AppendUint64(b, r.Len)
		b = append(b, byte(len(r.Keys)))
		for _, k := range r.Keys {
			b = appendStr8(b, k.Backend)
			b = appendBytes32(b, k.Key)
		}
	}
	return b, nil
}

func validate(a *Agent) error {
	switch {
	case a.Name == "" || len(a.Name) > MaxNameLen:
		return fmt.Errorf("metadata: name length %d out of range", len(a.Name))
	case len(a.Backends) > MaxBackends:
		return fmt.Errorf("metadata: %d backends > %d", len(a.Backends), MaxBackends)
	case len(a.Regions) > MaxRegions:
		return fmt.Errorf("metadata: %d regions > %d", len(a.Regions), MaxRegions)
	}
	for _, be := range a.Backends {
		if be.Name == "" || len(be.Name) > MaxNameLen || len(be.Address) > MaxAddrLen {
			return fmt.Errorf("metadata: backend %q invalid", be.Name)
		}
	}
	for _, r := range a.Regions {
		if len(r.Keys) > MaxKeysPerReg {
			return fmt.Errorf("metadata: region %d has %d keys", r.ID, len(r.Keys))
		}
		for _, k := range r.Keys {
			if k.Backend == "" || len(k.Backend) > MaxNameLen || len(k.Key) > MaxKeyLen {
				return fmt.Errorf("metadata: region %d key %q invalid", r.ID, k.Backend)
			}
		}
	}
	return nil
}

func appendStr8(b []byte, s string) []byte {
	return append(append(b, byte(len(s))), s...)
}

func appendBytes32(b, v []byte) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(v))), v...)
}
