// Package s3tier is the shared object-store KV tier (G4): blocks as
// immutable objects in a bucket of any S3-compatible store, written by
// any worker and loadable by every worker serving the same model and
// block size.
//
// An object's key is its namespace (model, block size, block bytes) and
// its block's chained hash, so the same tokens always land on the same
// key: a block is written once, with a conditional PUT (If-None-Match:
// *), and a second writer learns it is there from the 412 instead of
// writing it again. An object is a kvbm block encoding (header with
// CRC-32C checksums, then the data); a read that fails its checksum is
// discarded, deleted from the store, and reported as kvbm.ErrCorrupt,
// and the caller recomputes.
//
// The tier moves blocks through a libs/nixl agent of its own with the obj
// storage backend: a block is encoded into one of the tier's staging
// buffers (its registered memory), and each object is registered by its
// key for the one transfer that writes or reads it whole, so a block goes
// to and from the store by the same descriptor API as every other KV
// transfer. Listing, probing and deleting are not transfers: the tier
// makes those calls itself, on the client it shares with the backend.
//
// What the tier advertises is what it knows is in the store: the blocks
// it wrote or found written, those it found when it listed the namespace (at open, then
// every Refresh period). The knowledge is bounded by
// Blocks (least recently used first out); the store itself is never
// emptied by a worker. Every call to the store has a deadline, and after
// consecutive failures the tier stops calling for a while (failing fast),
// so a store that is down or slow costs requests nothing but its blocks.
package s3tier

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/obj"
)

// Config opens an object-store tier.
type Config struct {
	// Endpoint is the store's URL (e.g. http://127.0.0.1:7070); empty
	// uses AWS's. Credentials come from the standard variables
	// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ...), or
	// from AccessKey and SecretKey when set.
	Endpoint             string
	Region               string // default us-east-1
	Bucket               string
	AccessKey, SecretKey string
	// Namespace names the model the blocks belong to (with the block size
	// and bytes, the key prefix), e.g. "llama-3-8b".
	Namespace  string
	BlockSize  int // tokens a block
	BlockBytes int
	// Blocks bounds how many objects the tier keeps track of.
	Blocks int
	// Timeout bounds each call to the store (default 5s); Refresh is how
	// often the namespace is listed for blocks other workers wrote
	// (default 10s; negative: only at open).
	Timeout, Refresh time.Duration
	OnChange         kvbm.OnChange
	// HTTPClient is the client to the store (default a fresh one).
	HTTPClient *http.Client
	// Depth is how many blocks move to or from the store at once, each
	// through a staging buffer of its own (default 16).
	Depth int
	// Observe, when set, is told of each block the tier wrote, found
	// written, read or found gone, outside the tier's lock: a worker
	// reports them to the kvbm-controller's catalog of the store.
	Observe Observer
}

// Observer learns what the tier did with the store. Its methods must not
// block: they run on the path of an offload or an onboarding.
type Observer interface {
	// Wrote: the block's object of objectBytes is in the store; stored
	// is false when another writer was first (the conditional PUT was
	// refused) and took is then the refused call's time.
	Wrote(hash uint64, objectBytes int, took time.Duration, stored bool)
	// Read: the block was loaded, objectBytes in took.
	Read(hash uint64, objectBytes int, took time.Duration)
	// Gone: the block's object was missing, or failed its check and was
	// deleted.
	Gone(hash uint64)
}

// Tier is the object-store tier.
type Tier struct {
	cfg     Config
	client  *s3.Client
	agent   *nixl.Agent
	staging *arena.Arena
	mem     nixl.RegionID // staging, registered with agent
	slotLen int           // bytes a staging buffer: the largest object
	bufs    chan int      // free staging buffers
	regMu   sync.RWMutex
	regs    []registered // the caller's memory (kvbm.Registrar)
	prefix  string
	idx     *index
	brk     breaker
	stop    context.CancelFunc
	done    chan struct{}
	closed  atomic.Bool
}

// Open connects to the store and checks the bucket, so that a wrong
// endpoint, bucket or credentials fail at start-up in one line naming the
// setting; then it lists what the namespace holds.
func Open(ctx context.Context, cfg Config) (*Tier, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	client, err := NewClient(ctx, ClientConfig{Endpoint: cfg.Endpoint, Region: cfg.Region,
		AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, err
	}
	t := &Tier{cfg: cfg, client: client, done: make(chan struct{}),
		prefix: Key{Namespace: cfg.Namespace, BlockSize: cfg.BlockSize, BlockBytes: cfg.BlockBytes}.Prefix(),
		idx:    newIndex(cfg.Blocks, cfg.OnChange)}
	hctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if _, err := client.HeadBucket(hctx, &s3.HeadBucketInput{Bucket: aws.String(cfg.Bucket)}); err != nil {
		return nil, fmt.Errorf("kvbm: object tier: %w", Explain(cfg.Bucket, cfg.Endpoint, err))
	}
	if err := t.openAgent(); err != nil {
		_ = t.release()
		return nil, err
	}
	if err := t.list(ctx); err != nil {
		_ = t.release()
		return nil, fmt.Errorf("kvbm: object tier: listing %q: %w", t.prefix, err)
	}
	lctx, stop := context.WithCancel(context.Background())
	t.stop = stop
	go t.refresher(lctx)
	return t, nil
}

func (c *Config) validate() error {
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.Refresh == 0 {
		c.Refresh = 10 * time.Second
	}
	if c.Depth <= 0 {
		c.Depth = 16
	}
	switch {
	case c.Bucket == "":
		return errors.New("kvbm: object tier: no bucket")
	case c.Namespace == "" || strings.ContainsAny(c.Namespace, "/ "):
		return fmt.Errorf("kvbm: object tier: namespace %q: want a non-empty name without '/' or spaces (path-escape it)", c.Namespace)
	case c.BlockSize <= 0 || c.BlockBytes <= 0 || c.Blocks <= 0:
		return fmt.Errorf("kvbm: object tier: block size %d, %d bytes, %d blocks: all must be positive", c.BlockSize, c.BlockBytes, c.Blocks)
	case c.BlockSize > kvbm.MaxHeaderTokens:
		return fmt.Errorf("kvbm: object tier: block size %d: at most %d tokens", c.BlockSize, kvbm.MaxHeaderTokens)
	case (c.AccessKey == "") != (c.SecretKey == ""):
		return errors.New("kvbm: object tier: an access key needs its secret key, and the reverse")
	}
	return nil
}

// Kind is kvtier.External.
func (t *Tier) Kind() kvtier.Tier { return kvtier.External }

// BlockBytes is the size of a block's data.
func (t *Tier) BlockBytes() int { return t.cfg.BlockBytes }

func (t *Tier) key(hash uint64) string { return t.prefix + strconv.FormatUint(hash, 16) }

func (t *Tier) call(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if t.closed.Load() {
		return nil, nil, kvbm.ErrClosed
	}
	if !t.brk.allow() {
		return nil, nil, fmt.Errorf("kvbm: object tier: %w", errBackingOff)
	}
	cctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	return cctx, cancel, nil
}

// Put writes block m unless the store has it (see kvbm.Tier).
func (t *Tier) Put(ctx context.Context, m kvbm.Meta, data []byte) (bool, error) {
	if len(data) != t.cfg.BlockBytes {
		return false, fmt.Errorf("kvbm: object put %#x: %d bytes, want %d", m.Hash, len(data), t.cfg.BlockBytes)
	}
	if t.closed.Load() {
		return false, kvbm.ErrClosed
	}
	if !t.idx.reserve(m.Hash) {
		return false, nil // known to be there, or being written
	}
	cctx, cancel, err := t.call(ctx)
	if err != nil {
		t.idx.abandon(m.Hash)
		return false, err
	}
	defer cancel()
	b, err := t.buffer(cctx)
	if err != nil {
		t.idx.abandon(m.Hash)
		return false, err
	}
	defer func() { t.bufs <- b }()
	buf := t.buf(b)
	hdr := kvbm.AppendHeader(buf[:0], m, data)
	size := len(hdr) + copy(buf[len(hdr):], data)
	start := time.Now()
	err = t.transfer(cctx, nixl.Write, m.Hash, t.staged(b, size))
	switch {
	case err == nil:
		t.brk.ok()
		t.idx.publish(m, size, len(data), true)
		t.observeWrote(m.Hash, size, time.Since(start), true)
		return true, nil
	case errors.Is(err, obj.ErrExists): // another writer was first: the same bytes are there
		t.brk.ok()
		t.idx.publish(m, size, 0, false)
		t.observeWrote(m.Hash, size, time.Since(start), false)
		return false, nil
	default:
		t.brk.fail()
		t.idx.abandon(m.Hash)
		return false, fmt.Errorf("kvbm: object put %#x: %w", m.Hash, err)
	}
}

// Get reads block hash and checks it (see kvbm.Tier).
func (t *Tier) Get(ctx context.Context, hash uint64, dst []byte) (kvbm.Meta, error) {
	if len(dst) != t.cfg.BlockBytes {
		return kvbm.Meta{}, fmt.Errorf("kvbm: object get %#x: %d bytes, want %d", hash, len(dst), t.cfg.BlockBytes)
	}
	if t.closed.Load() {
		return kvbm.Meta{}, kvbm.ErrClosed
	}
	size, ok := t.idx.size(hash)
	if !ok {
		t.idx.miss()
		return kvbm.Meta{}, kvbm.ErrNotFound
	}
	cctx, cancel, err := t.call(ctx)
	if err != nil {
		t.idx.readFailed()
		return kvbm.Meta{}, err
	}
	defer cancel()
	if size < kvbm.HeaderLen(0)+len(dst) || size > t.slotLen {
		return kvbm.Meta{}, t.corrupt(hash, fmt.Errorf("%w: an object of %d bytes", kvbm.ErrCorrupt, size))
	}
	b, err := t.buffer(cctx)
	if err != nil {
		return kvbm.Meta{}, err
	}
	defer func() { t.bufs <- b }()
	// The data goes straight into dst when it is registered memory, the
	// header into the staging buffer; else both into the staging buffer.
	hl := size - len(dst)
	local := []nixl.Desc{t.staged(b, size)}
	if d, ok := t.registeredAt(dst); ok {
		local = []nixl.Desc{t.staged(b, hl), d}
	}
	start := time.Now()
	err = t.transfer(cctx, nixl.Read, hash, local...)
	switch {
	case errors.Is(err, obj.ErrNotFound): // deleted from the store: no longer there
		t.brk.ok()
		t.idx.drop(hash, false)
		t.observeGone(hash)
		return kvbm.Meta{}, kvbm.ErrNotFound
	case errors.Is(err, nixl.ErrOutOfRange): // shorter than it was written
		t.brk.ok()
		return kvbm.Meta{}, t.corrupt(hash, fmt.Errorf("%w: %w", kvbm.ErrCorrupt, err))
	case err != nil:
		t.brk.fail()
		t.idx.readFailed()
		return kvbm.Meta{}, fmt.Errorf("kvbm: object get %#x: %w", hash, err)
	}
	t.brk.ok()
	data := dst
	if len(local) == 1 {
		data = t.buf(b)[hl:size]
	}
	m, err := kvbm.CheckBlock(t.buf(b)[:hl], data)
	switch {
	case err != nil:
		return kvbm.Meta{}, t.corrupt(hash, err)
	case m.Hash != hash:
		return kvbm.Meta{}, t.corrupt(hash, fmt.Errorf("%w: object holds block %#x", kvbm.ErrCorrupt, m.Hash))
	}
	if len(local) == 1 {
		copy(dst, data)
	}
	t.idx.hit(hash, len(dst))
	if t.cfg.Observe != nil {
		t.cfg.Observe.Read(hash, size, time.Since(start))
	}
	return m, nil
}

// corrupt forgets a block whose object is not what was written, deletes
// it so that no worker reads it again, and returns err for it.
func (t *Tier) corrupt(hash uint64, err error) error {
	t.idx.drop(hash, true)
	t.discard(hash)
	t.observeGone(hash)
	return fmt.Errorf("kvbm: object get %#x: %w", hash, err)
}

func (t *Tier) observeWrote(hash uint64, n int, took time.Duration, stored bool) {
	if t.cfg.Observe != nil {
		t.cfg.Observe.Wrote(hash, n, took, stored)
	}
}

func (t *Tier) observeGone(hash uint64) {
	if t.cfg.Observe != nil {
		t.cfg.Observe.Gone(hash)
	}
}

// discard deletes an object that failed its check, so no worker reads it
// again; a writer may then store the block anew.
func (t *Tier) discard(hash uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Timeout)
	defer cancel()
	_, _ = t.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(t.cfg.Bucket), Key: aws.String(t.key(hash))})
}

// Prefix counts the leading hashes the tier knows the store holds.
func (t *Tier) Prefix(hashes []uint64) int { return t.idx.prefix(hashes) }

// Blocks lists the blocks the tier knows the store holds.
func (t *Tier) Blocks() []kvbm.Meta { return t.idx.blocks() }

// Stats returns what the tier knows and its traffic.
func (t *Tier) Stats() kvbm.Stats {
	s := t.idx.stats()
	s.BlockBytes = t.cfg.BlockBytes
	return s
}

// Close stops the refresher and waits for the transfers in flight. The
// objects stay in the store.
func (t *Tier) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	if t.stop != nil {
		t.stop()
		<-t.done
		t.stop = nil
	}
	return t.release()
}
