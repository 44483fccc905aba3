package engine

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/kvbm/s3tier"
	"switchyard.dev/libs/kvbm/tiertest"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/deptest"
)

// tierReq is the request of the tests below for a prompt salt: 100
// tokens, so six full blocks are offloaded and onboarded. Prompts of
// salts apart by less than 250 share no block; the tests use salts below
// 100, evict 100 and up.
func tierReq(salt int) Request {
	return Request{Prompt: prompt(100, salt), Stop: StopParams{MaxTokens: 12, IgnoreEOS: true}}
}

// tierBlocks is the hashes of the blocks of tierReq(salt) a tier can
// hold (the last token's block is always computed).
func tierBlocks(salt int) []uint64 {
	p := tierReq(salt).Prompt
	return kvhash.BlockHashes(p[:(len(p)-1)/16*16], 16, 0)
}

// exactRunner runs requests on engines under test and checks each output
// against a reference engine without tiers, token for token and byte for
// byte.
type exactRunner struct {
	t     *testing.T
	ref   *Engine
	want  map[int]result
	fresh int // the next salt evict uses
}

func newExactRunner(t *testing.T) *exactRunner {
	return &exactRunner{t: t, ref: start(t, Config{BlockSize: 16}, stories(t)), want: map[int]result{}, fresh: 100}
}

func (x *exactRunner) run(e *Engine, salt int) result {
	x.t.Helper()
	want, ok := x.want[salt]
	if !ok {
		want = run(x.t, x.ref, tierReq(salt))
		x.want[salt] = want
	}
	got := run(x.t, e, tierReq(salt)) // fails the test on any error
	if !sameTokens(got.tokens, want.tokens) || got.text != want.text {
		x.t.Fatalf("prompt %d: %q, want %q", salt, got.text, want.text)
	}
	return got
}

// evict runs prompts never run before until the first block of salt's
// prompt has left e's device, and waits for the offloads they caused. No
// tier holds their blocks, so none is onboarded: a load would measure the
// tier's load time, and a tier measured slower than a recompute (a store
// on this machine, against stories260K) is not loaded from again.
func (x *exactRunner) evict(e *Engine, salt int) {
	x.t.Helper()
	first := tierBlocks(salt)[:1]
	for range 10 {
		run(x.t, e, Request{Prompt: prompt(150, x.fresh), Stop: StopParams{MaxTokens: 8, IgnoreEOS: true}})
		x.fresh++
		e.mu.Lock() // Probe, not Pin: a pin would refresh the block in the LRU
		held, _ := e.kv.Probe(first)
		e.mu.Unlock()
		if held == 0 {
			waitFor(x.t, "offloads to finish", e.offloadsDone)
			return
		}
	}
	x.t.Fatalf("prompt %d is still cached on the device after ten other prompts", salt)
}

// A shared store that is stopped, or answers later than the tier's
// deadline, costs requests nothing but their blocks: every request
// succeeds with exact output, onboarding falls back to the prefill and
// offload skips the blocks, each failure counted by the tier. Once the
// store is back the tier works again by itself: offloads land, the
// request that could not onboard during the faults does, and a later
// engine loads what was written after them.
func TestTierStoreDownOrSlow(t *testing.T) {
	t.Parallel()
	gw := deptest.StartVersityGW(t)
	raw := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(gw.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, "")})
	if _, err := raw.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("kv-faults")}); err != nil {
		t.Fatal(err)
	}
	px := startFaultProxy(t, strings.TrimPrefix(gw.Endpoint, "http://"))
	const timeout = 500 * time.Millisecond
	shared := TierConfig{Open: func(bb int, on kvbm.OnChange) (kvbm.Tier, error) {
		return s3tier.Open(context.Background(), s3tier.Config{Endpoint: px.endpoint(), Bucket: "kv-faults",
			AccessKey: gw.AccessKey, SecretKey: gw.SecretKey, Namespace: "stories260K", BlockSize: 16, BlockBytes: bb,
			Blocks: 1024, OnChange: on, Refresh: -1, Timeout: timeout})
	}}
	x := newExactRunner(t)
	e := start(t, tinyG1(shared), stories(t))
	store := e.tiers.list[0].t
	n := len(tierBlocks(31))

	// Up: the first prompt's blocks land in the store, then leave the device.
	x.run(e, 31)
	waitFor(t, "offloads to the store", e.offloadsDone)
	if got := store.Prefix(tierBlocks(31)); got != n {
		t.Fatalf("%d of the first prompt's %d blocks in the store", got, n)
	}
	x.evict(e, 31)

	phase := func(name string, newSalt int) {
		t.Helper()
		before := store.Stats()
		if got := x.run(e, 31); got.final.Usage.CachedPromptTokens != 0 {
			t.Errorf("%s: %d prompt tokens cached; want none: the store could not be read", name, got.final.Usage.CachedPromptTokens)
		}
		x.run(e, newSalt)
		waitFor(t, "offload attempts to end", e.offloadsDone)
		st := store.Stats()
		t.Logf("%s: tier stats %+v", name, st)
		if st.ReadErrors == before.ReadErrors || st.WriteErrors == before.WriteErrors || st.Puts != before.Puts || st.Hits != before.Hits {
			t.Errorf("%s: tier stats %+v, before %+v; want failed reads and writes counted, none done", name, st, before)
		}
		if store.Prefix(tierBlocks(newSalt)) != 0 {
			t.Errorf("%s: a block the store never took is advertised", name)
		}
	}

	// (a) The store's process is gone: connections are refused.
	gw.Stop()
	phase("store stopped", 32)

	// (b) The store is up again, but every byte to or from it is held
	// past the tier's deadline.
	px.setDelay(4 * timeout)
	gw.Start()
	x.evict(e, 31) // recomputed in (a)
	phase("store slow", 33)

	// Back: the tier tries the store again by itself once its breaker
	// lets it.
	px.setDelay(0)
	waitFor(t, "the store answering the tier", func() bool { return store.(*s3tier.Tier).Refresh(t.Context()) == nil })
	x.run(e, 34)
	waitFor(t, "offloads to the store", e.offloadsDone)
	if got := store.Prefix(tierBlocks(34)); got != n {
		t.Fatalf("after the store came back: %d of the last prompt's %d blocks offloaded", got, n)
	}
	x.evict(e, 31)
	if got := x.run(e, 31); got.final.Usage.CachedPromptTokens != n*16 || onboarded(e, kvtier.External) != int64(n) {
		t.Errorf("after the store came back: %d prompt tokens cached, %d blocks onboarded; want %d, %d",
			got.final.Usage.CachedPromptTokens, onboarded(e, kvtier.External), n*16, n)
	}
	later := start(t, tinyG1(shared), stories(t))
	if got := x.run(later, 34); got.final.Usage.CachedPromptTokens != n*16 || onboarded(later, kvtier.External) != int64(n) {
		t.Errorf("a later engine: %d prompt tokens cached, %d blocks onboarded; want %d, %d",
			got.final.Usage.CachedPromptTokens, onboarded(later, kvtier.External), n*16, n)
	}
}

// A disk tier whose writes start failing after it opened (its slab made
// read-only under it) costs requests nothing: outputs stay exact, offload
// skips the blocks it cannot write and the tier counts them, the blocks
// written before are still onboarded, and once writes work again offload
// lands without a restart.
func TestTierDiskWritesFail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	x := newExactRunner(t)
	e := start(t, tinyG1(diskTier(dir, 64)), stories(t))
	disk := e.tiers.list[0].t
	n := len(tierBlocks(31))
	x.run(e, 31)
	waitFor(t, "offloads to disk", e.offloadsDone)
	if got := disk.Prefix(tierBlocks(31)); got != n {
		t.Fatalf("%d of the first prompt's %d blocks on disk", got, n)
	}
	slabs, err := filepath.Glob(filepath.Join(dir, "kvbm-slab-*.kv"))
	if err != nil || len(slabs) != 1 {
		t.Fatalf("slab: %v %v", slabs, err)
	}

	restore := tiertest.RefuseWrites(t, slabs[0])
	before, offloaded := disk.Stats(), e.Metrics().Tiers[0].Offloaded
	for _, salt := range []int{32, 33} {
		x.run(e, salt)
		waitFor(t, "offload attempts to end", e.offloadsDone) // before the next request can evict the blocks
	}
	st := disk.Stats()
	if st.WriteErrors < uint64(2*n) || st.Puts != before.Puts || e.Metrics().Tiers[0].Offloaded != offloaded {
		t.Errorf("while writes fail: tier stats %+v, before %+v; want every block of the two prompts a counted write error", st, before)
	}
	if disk.Prefix(tierBlocks(32)) != 0 || disk.Prefix(tierBlocks(33)) != 0 {
		t.Error("a block whose write failed is advertised")
	}
	x.evict(e, 31)
	if got := x.run(e, 31); got.final.Usage.CachedPromptTokens != n*16 {
		t.Errorf("while writes fail: %d prompt tokens cached; want the %d written before onboarded", got.final.Usage.CachedPromptTokens, n*16)
	}

	restore()
	x.run(e, 34)
	waitFor(t, "offloads to disk", e.offloadsDone)
	if got := disk.Prefix(tierBlocks(34)); got != n || disk.Stats().ReadErrors != 0 {
		t.Errorf("once writes work again: %d of the last prompt's %d blocks on disk, stats %+v", got, n, disk.Stats())
	}
}

// faultProxy is the network between a tier and its store: it forwards
// TCP both ways, holding each chunk back for the delay set (a store that
// answers later than the tier waits), and refuses a connection when the
// store refuses it.
type faultProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	delay  time.Duration
	change chan struct{} // closed when the delay changes
	conns  map[net.Conn]bool
	closed bool
}

func startFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: target, change: make(chan struct{}), conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *faultProxy) setDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
	close(p.change)
	p.change = make(chan struct{})
}

func (p *faultProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *faultProxy) handle(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil { // the store is down: so is the connection
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_, _ = c.Close(), up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go p.pipe(up, c)
	p.pipe(c, up)
}

// pipe copies src to dst, each chunk after the delay; either side's end
// ends both.
func (p *faultProxy) pipe(dst, src net.Conn) {
	defer func() {
		_, _ = dst.Close(), src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.hold()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hold waits out the delay, starting again whenever it changes.
func (p *faultProxy) hold() {
	for {
		p.mu.Lock()
		d, change := p.delay, p.change
		p.mu.Unlock()
		if d == 0 {
			return
		}
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
			return
		case <-change:
			timer.Stop()
		}
	}
}

func (p *faultProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
}
