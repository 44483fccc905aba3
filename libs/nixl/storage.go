package nixl

import (
	"context"
	"errors"
	"fmt"
)

// RegisterStorage registers seg with the agent's storage backend of its
// kind and returns its region id. A storage region is the agent's own: it
// is not listed in Metadata (registering one changes no blob, and peers
// cannot address it), and a transfer to it names the agent itself as
// Peer, between its memory (Local) and its storage (Remote), as NIXL's
// storage backends take the initiator as their target.
func (a *Agent) RegisterStorage(seg Segment) (RegionID, error) {
	if seg == nil || seg.Size() == 0 {
		return 0, errors.New("nixl: register empty storage")
	}
	b := a.storageFor(seg.Kind())
	if b == nil {
		return 0, fmt.Errorf("%w for %v storage", ErrNoBackend, seg.Kind())
	}
	id := a.regions.reserve()
	if err := b.RegisterStorage(id, seg); err != nil {
		return 0, fmt.Errorf("nixl: register %v with %s: %w", seg.Kind(), b.Name(), err)
	}
	a.regions.insert(id, seg)
	return id, nil
}

// DeregisterStorage is DeregisterMemory for a storage region: it waits for
// the transfers on it to end (bounded by ctx), then releases it in its
// backend (the file backend closes its descriptor).
func (a *Agent) DeregisterStorage(ctx context.Context, id RegionID) error {
	seg, ok := a.regions.segment(id)
	if ok && seg == nil {
		return fmt.Errorf("%w: region %d is memory: DeregisterMemory", ErrUnknownRegion, id)
	}
	removed, err := a.regions.remove(ctx, id)
	if err != nil || !removed {
		return err
	}
	b := a.storageFor(seg.Kind())
	if err := b.DeregisterStorage(id); err != nil {
		return fmt.Errorf("nixl: deregister storage %d: %s: %w", id, b.Name(), err)
	}
	return nil
}

// storageFor returns the storage backend serving kind, or nil.
func (a *Agent) storageFor(kind SegKind) StorageBackend {
	for _, b := range a.storage {
		if b.Kind() == kind {
			return b
		}
	}
	return nil
}

// postStorage starts a transfer between the agent's memory (req.Local)
// and its storage (req.Remote). Every remote region must be storage of
// one kind, so one backend serves the transfer.
func (a *Agent) postStorage(req XferRequest) (*Xfer, error) {
	if req.Notif != nil {
		return nil, errors.New("nixl: a transfer to the agent's own storage carries no notification")
	}
	var b StorageBackend
	br := &Request{Op: req.Op, Pairs: make([]Pair, 0, len(req.Local))}
	var releases []func()
	releaseAll := func() {
		for _, r := range releases {
			r()
		}
	}
	for i, r := range req.Remote {
		l := req.Local[i]
		if l.Len != r.Len {
			releaseAll()
			return nil, fmt.Errorf("%w: pair %d: local %d, storage %d bytes", ErrLenMismatch, i, l.Len, r.Len)
		}
		seg, release, err := a.regions.acquireStorage(r.Region, r.Offset, r.Len)
		if err != nil {
			releaseAll()
			return nil, fmt.Errorf("nixl: storage descriptor %d: %w", i, err)
		}
		releases = append(releases, release)
		if sb := a.storageFor(seg.Kind()); b == nil {
			b = sb
		} else if sb != b {
			releaseAll()
			return nil, fmt.Errorf("nixl: storage descriptor %d: %v among %v: one kind of storage a transfer", i, seg.Kind(), b.Kind())
		}
		mem, release, err := a.regions.Acquire(l.Region, l.Offset, l.Len)
		if err != nil {
			releaseAll()
			return nil, fmt.Errorf("nixl: local descriptor %d: %w", i, err)
		}
		releases = append(releases, release)
		if l.Len > 0 {
			br.Pairs = append(br.Pairs, Pair{Local: mem, LocalRegion: l.Region, Remote: RemoteDesc{Region: r.Region, Offset: r.Offset}})
		}
	}
	x := newXfer(func(error) { releaseAll() })
	if len(br.Pairs) == 0 {
		x.finish(nil)
		return x, nil
	}
	br.Canceled = x.cancel
	br.Done = x.finish
	b.Post(br)
	return x, nil
}
