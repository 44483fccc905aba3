package nixl

import (
	"fmt"
	"os"
)

// SegKind is the kind of storage a segment is, as NIXL's memory types
// FILE_SEG and OBJ_SEG; a storage backend serves one kind.
type SegKind uint8

const (
	// FileSeg is a POSIX file; a descriptor's offset is a file offset.
	FileSeg SegKind = 1
	// ObjSeg is an object in an object store; a descriptor's offset and
	// length are a byte range of the object.
	ObjSeg SegKind = 2
)

func (k SegKind) String() string {
	switch k {
	case FileSeg:
		return "FILE_SEG"
	case ObjSeg:
		return "OBJ_SEG"
	}
	return fmt.Sprintf("SegKind(%d)", uint8(k))
}

// Segment is storage that RegisterStorage makes addressable by
// descriptors: [0, Size) of a file or an object. Its concrete types are
// FileSegment and ObjectSegment.
type Segment interface {
	Kind() SegKind
	Size() uint64
}

// FileSegment is a file registered as storage (NIXL registers a FILE_SEG
// by its file descriptor). The file backend keeps a duplicate of the
// descriptor, so the caller may close File once RegisterStorage returns,
// and a descriptor number the process reuses meanwhile never receives a
// transfer's bytes.
type FileSegment struct {
	File *os.File
	// Len bounds the region: descriptors address [0, Len) of the file. The
	// file may be shorter: a WRITE extends it, a READ past its end fails.
	Len uint64
}

// Kind implements Segment.
func (FileSegment) Kind() SegKind { return FileSeg }

// Size implements Segment.
func (s FileSegment) Size() uint64 { return s.Len }

// ObjectSegment is an object registered as storage (NIXL's OBJ_SEG, whose
// key is its descriptor's meta info); the bucket is the backend's.
type ObjectSegment struct {
	Key string
	// Len is the object's size: descriptors address [0, Len) of it.
	Len uint64
}

// Kind implements Segment.
func (ObjectSegment) Kind() SegKind { return ObjSeg }

// Size implements Segment.
func (s ObjectSegment) Size() uint64 { return s.Len }

// StorageBackend moves bytes between an agent's own memory and its
// storage: NIXL's local-only plugins (POSIX, OBJ), for which initiator and
// target are the same agent. The agent never advertises one in metadata
// nor reaches a peer through it. Implementations live in backend/file and
// backend/obj and are injected as StorageFactory values.
type StorageBackend interface {
	// Name is the backend's identifier ("file", "obj").
	Name() string
	// Kind is the storage the backend serves.
	Kind() SegKind
	// RegisterStorage prepares seg, of the backend's kind, as region id.
	RegisterStorage(id RegionID, seg Segment) error
	// DeregisterStorage undoes RegisterStorage; the agent calls it only
	// after all transfers on the region have ended.
	DeregisterStorage(id RegionID) error
	// Post starts req and returns at once, as Conn.Post: each pair's Local
	// is the agent's memory and its Remote a region the backend
	// registered (Key is nil). Read moves storage into memory, Write
	// memory into storage. The backend calls req.Done exactly once, after
	// which it no longer touches the local buffers.
	Post(req *Request)
	// Close fails posted transfers with ErrClosed and returns once none
	// touches memory or storage any more.
	Close() error
}

// StorageFactory builds a storage backend for one agent.
type StorageFactory func(env Env) (StorageBackend, error)
