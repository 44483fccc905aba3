package s3tier

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/obj"
)

// agentName names the tier's agent; its transfers are to itself.
const agentName = "kvbm-object"

// openAgent maps the staging buffers and registers them with an agent of
// the tier's own, whose obj backend calls the store through t.client.
func (t *Tier) openAgent() error {
	t.slotLen = kvbm.HeaderLen(t.cfg.BlockSize) + t.cfg.BlockBytes
	staging, err := arena.Map(t.cfg.Depth * t.slotLen)
	if err != nil {
		return fmt.Errorf("kvbm: object tier: %w", err)
	}
	t.staging, t.bufs = staging, make(chan int, t.cfg.Depth)
	for i := range t.cfg.Depth {
		t.bufs <- i
	}
	a, err := nixl.NewAgent(nixl.Config{Name: agentName, Storage: []nixl.StorageFactory{obj.New(obj.Config{
		Client: t.client, Bucket: t.cfg.Bucket, Timeout: t.cfg.Timeout, Depth: 1, PartSize: t.slotLen, NoOverwrite: true,
	})}})
	if err != nil {
		return fmt.Errorf("kvbm: object tier: %w", err)
	}
	t.agent = a
	if t.mem, err = a.RegisterMemory(staging.Bytes()); err != nil {
		return fmt.Errorf("kvbm: object tier: %w", err)
	}
	return nil
}

// release closes the agent (once its transfers ended) and unmaps the
// staging buffers.
func (t *Tier) release() error {
	var err error
	if t.agent != nil {
		err = t.agent.Close()
		t.agent = nil
	}
	if t.staging != nil {
		err = errors.Join(err, t.staging.Close())
		t.staging = nil
	}
	return err
}

func (t *Tier) buf(b int) []byte { return t.staging.Bytes()[b*t.slotLen : (b+1)*t.slotLen] }

func (t *Tier) buffer(ctx context.Context) (int, error) {
	select {
	case b := <-t.bufs:
		return b, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// staged is the descriptor of the first n bytes of staging buffer b.
func (t *Tier) staged(b, n int) nixl.Desc {
	return nixl.Desc{Region: t.mem, Offset: uint64(b * t.slotLen), Len: uint64(n)}
}

// transfer moves the object of block hash, whole, to (Write) or from
// (Read) local, the descriptors of its bytes in order. It returns only
// once the backend no longer touches them.
func (t *Tier) transfer(ctx context.Context, op nixl.Op, hash uint64, local ...nixl.Desc) error {
	n := uint64(0)
	for _, d := range local {
		n += d.Len
	}
	id, err := t.agent.RegisterStorage(nixl.ObjectSegment{Key: t.key(hash), Len: n})
	if err != nil {
		return err
	}
	defer func() { _ = t.agent.DeregisterStorage(context.Background(), id) }()
	remote, off := make([]nixl.Desc, len(local)), uint64(0)
	for i, d := range local {
		remote[i] = nixl.Desc{Region: id, Offset: off, Len: d.Len}
		off += d.Len
	}
	x, err := t.agent.Post(nixl.XferRequest{Op: op, Peer: agentName, Local: local, Remote: remote})
	if err != nil {
		return err
	}
	return x.WaitOrCancel(ctx)
}

// registered is memory registered with the tier's agent.
type registered struct {
	mem []byte
	id  nixl.RegionID
}

// RegisterMemory implements kvbm.Registrar: a Get into mem reads a
// block's data straight into it, its header into a staging buffer, in
// one scattered GET.
func (t *Tier) RegisterMemory(mem []byte) error {
	if t.closed.Load() {
		return kvbm.ErrClosed
	}
	id, err := t.agent.RegisterMemory(mem)
	if err != nil {
		return fmt.Errorf("kvbm: object tier: %w", err)
	}
	t.regMu.Lock()
	t.regs = append(t.regs, registered{mem: mem, id: id})
	t.regMu.Unlock()
	return nil
}

// registeredAt returns the descriptor of dst in registered memory.
func (t *Tier) registeredAt(dst []byte) (nixl.Desc, bool) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(dst)))
	t.regMu.RLock()
	defer t.regMu.RUnlock()
	for _, r := range t.regs {
		base := uintptr(unsafe.Pointer(unsafe.SliceData(r.mem)))
		if p >= base && p+uintptr(len(dst)) <= base+uintptr(len(r.mem)) {
			return nixl.Desc{Region: r.id, Offset: uint64(p - base), Len: uint64(len(dst))}, true
		}
	}
	return nixl.Desc{}, false
}
