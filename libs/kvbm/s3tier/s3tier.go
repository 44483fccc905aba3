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
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

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

// ClientConfig is how to reach a store.
type ClientConfig struct {
	// Endpoint is the store's URL; empty uses AWS's.
	Endpoint string
	Region   string // default us-east-1
	// AccessKey and SecretKey, when set, replace the SDK's standard
	// credential chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// AWS_PROFILE, ...).
	AccessKey, SecretKey string
	HTTPClient           *http.Client // default a fresh one
}

// NewClient returns an S3 client configured as the tier's own: path-style
// addressing (what S3-compatible stores serve), and the SDK's checksums
// only where the API requires them (a block's CRC-32C covers it end to
// end). The kvbm-controller's catalog reaches the store through it too.
func NewClient(ctx context.Context, c ClientConfig) (*s3.Client, error) {
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return nil, errors.New("kvbm: object store: an access key needs its secret key, and the reverse")
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(c.Region)}
	if c.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: c.AccessKey, SecretAccessKey: c.SecretKey, Source: "s3tier.ClientConfig"}, nil
		})))
	}
	if c.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(c.HTTPClient))
	}
	acfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("kvbm: object store: credentials: %w", err)
	}
	return s3.NewFromConfig(acfg, func(o *s3.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		o.UsePathStyle = true
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}), nil
}

// Explain turns a store's refusal of a call about bucket into one line a
// user can act on: credentials refused, no such bucket, or unreachable.
func Explain(bucket, endpoint string, err error) error {
	return fmt.Errorf("bucket %q at %s: %w", bucket, endpointName(endpoint), explain(err))
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

func endpointName(e string) string {
	if e == "" {
		return "the default AWS endpoint"
	}
	return e
}

// explain turns the store's refusals into what a user fixes.
func explain(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "Forbidden", "AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId", "403":
			return fmt.Errorf("credentials refused (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY): %w", err)
		case "NotFound", "NoSuchBucket", "404":
			return fmt.Errorf("no such bucket: %w", err)
		}
	}
	return fmt.Errorf("unreachable or refused: %w", err)
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

// Refresh lists the namespace now (it also runs every Config.Refresh).
func (t *Tier) Refresh(ctx context.Context) error { return t.list(ctx) }

// list learns the blocks the namespace holds. A block is named by its key;
// its parent is learnt only when it is read, so blocks found by listing
// are announced without one.
func (t *Tier) list(ctx context.Context) error {
	_, cancel, err := t.call(ctx) // closed, or backing off
	if err != nil {
		return err
	}
	cancel()
	p := s3.NewListObjectsV2Paginator(t.client, &s3.ListObjectsV2Input{Bucket: aws.String(t.cfg.Bucket), Prefix: aws.String(t.prefix)})
	for p.HasMorePages() {
		// Each page has its own deadline: a large namespace takes many.
		cctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
		page, err := p.NextPage(cctx)
		cancel()
		if err != nil {
			t.brk.fail()
			return err
		}
		for _, o := range page.Contents {
			h, err := strconv.ParseUint(strings.TrimPrefix(aws.ToString(o.Key), t.prefix), 16, 64)
			if err != nil {
				continue // not a block of ours
			}
			t.idx.learn(h, int(aws.ToInt64(o.Size)))
		}
	}
	t.brk.ok()
	return nil
}

func (t *Tier) refresher(ctx context.Context) {
	defer close(t.done)
	if t.cfg.Refresh < 0 {
		return
	}
	tick := time.NewTicker(t.cfg.Refresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_ = t.list(ctx) // a store that is down is retried at the next tick
		}
	}
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

// errBackingOff is returned while the breaker is open.
var errBackingOff = errors.New("store failing, backing off")

// breaker fails calls fast for a while after consecutive failures: a
// store that is down must not make every onboarding wait for a timeout.
type breaker struct {
	mu       sync.Mutex
	failures int
	until    time.Time
}

// breakerAfter failures in a row open the breaker for breakerFor.
const (
	breakerAfter = 3
	breakerFor   = 2 * time.Second
)

func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Now().After(b.until)
}

func (b *breaker) ok() {
	b.mu.Lock()
	b.failures = 0
	b.mu.Unlock()
}

func (b *breaker) fail() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if b.failures >= breakerAfter {
		b.until = time.Now().Add(breakerFor)
		b.failures = 0
	}
}
