package app

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/filedisc"
	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/libs/radix"
	"switchyard.dev/services/router/internal/snapshot"
	"switchyard.dev/services/router/internal/workertest"
)

// cluster is fake workers registered in a file discovery directory.
type cluster struct {
	dir     string
	workers map[string]*workertest.Worker
}

func newCluster(t *testing.T, ids ...string) *cluster {
	t.Helper()
	c := &cluster{dir: t.TempDir(), workers: map[string]*workertest.Worker{}}
	reg, err := filedisc.New(filedisc.Config{Dir: c.dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		w := workertest.Start(t)
		c.workers[id] = w
		r, err := reg.Register(t.Context(), discovery.Instance{ID: id, Role: discovery.RoleDecode, Model: "m", Version: "test",
			Address: w.Addr, Meta: map[string]string{"block_size": "4"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Deregister(context.Background()) })
	}
	return c
}

// startRouter runs a router in-process and returns it with its parts.
func (c *cluster) startRouter(t *testing.T, args ...string) (*meshtest.Running, *stack) {
	t.Helper()
	got := make(chan *stack, 1)
	base := []string{"-listen", "127.0.0.1:0", "-discovery", "file", "-discovery-dir", c.dir, "-block-size", "4"}
	r := meshtest.Start(t, spec("v0.0.0-test", func(s *stack) { got <- s }), append(base, args...)...)
	return r, <-got
}

func (c *cluster) dumps() int {
	n := 0
	for _, w := range c.workers {
		for _, r := range w.Requests() {
			if r.GetDump() {
				n++
			}
		}
	}
	return n
}

// A router killed and restarted while events flow resumes from its Redis
// snapshot (no new dumps) and ends with the same index as a router that
// never stopped.
func TestRedisRestart(t *testing.T) {
	t.Parallel()
	redis := deptest.StartRedis(t)
	c := newCluster(t, "w1", "w2")
	_, steady := c.startRouter(t)
	snapArgs := []string{"-redis-addr", redis.Addr, "-snapshot-interval", "50ms", "-namespace", t.Name()}
	r1, _ := c.startRouter(t, snapArgs...)
	deptest.Eventually(t, 20*time.Second, "initial dumps", func() bool { return c.dumps() == 4 })

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := uint64(1); ctx.Err() == nil; h++ {
				w.Store(h)
				if h%3 == 0 {
					w.Remove(h - 2)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	r1.Stop(t)
	time.Sleep(100 * time.Millisecond) // events keep flowing while it is down
	_, second := c.startRouter(t, snapArgs...)
	time.Sleep(200 * time.Millisecond)
	stop()
	wg.Wait()
	// Caught up: both routers hold every worker's last batch (equal
	// indexes alone can be two routers equally behind) and agree.
	caughtUp := func() bool {
		dump := second.index.Dump()
		for id, w := range c.workers {
			if dump[id].Next != w.State().Next {
				return false
			}
		}
		return second.index.Equal(steady.index) && len(second.index.Workers()) == 2
	}
	deptest.Eventually(t, 20*time.Second, "restored router catches up", caughtUp)
	// Each worker was dumped once for the first router. The restarted one
	// resumes from the snapshot; under heavy machine load one of its streams
	// may legitimately hit a gap and resync by dump (seen once in many runs),
	// but resuming must be the rule: at most one extra dump, never one per
	// worker.
	switch n := c.dumps(); n {
	case 4:
	case 5:
		t.Logf("one stream resynced by dump after the restart (machine load); the other resumed")
	default:
		t.Errorf("%d dump subscriptions; the restarted router should have resumed, not dumped", n)
	}
	for id, w := range c.workers {
		if got := second.index.Dump()[id]; got.Next != w.State().Next {
			t.Errorf("%s: next seq %d, want %d", id, got.Next, w.State().Next)
		}
	}
}

// With Redis down routing continues; snapshots resume when it returns.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	redis := deptest.StartRedis(t)
	c := newCluster(t, "w1")
	key := "switchyard:router:" + t.Name() + ":index"
	r, _ := c.startRouter(t, "-redis-addr", redis.Addr, "-snapshot-interval", "50ms", "-namespace", t.Name())
	store := snapshot.NewRedis(redis.Addr)
	defer store.Close()
	loaded := func() bool { b, err := store.Load(t.Context(), key); return err == nil && b != nil }
	deptest.Eventually(t, 20*time.Second, "first snapshot", loaded)
	redis.Stop()
	client := routerv1connect.NewRouterServiceClient(http.DefaultClient, r.URL())
	deptest.Eventually(t, 20*time.Second, "worker routable", func() bool {
		_, err := client.Route(t.Context(), connect.NewRequest(&routerv1.RouteRequest{RequestId: "q", Model: "m", TokenIds: []uint32{1, 2, 3, 4}}))
		return err == nil
	})
	redis.Start()
	redis.Wait(t)
	deptest.Eventually(t, 20*time.Second, "snapshot after redis returned", loaded)
}

// Shutdown saves the index once more, after the drain, and the process
// waits for that save: with no periodic save due, Redis then holds exactly
// the stopped router's index.
func TestSnapshotOnShutdown(t *testing.T) {
	t.Parallel()
	redis := deptest.StartRedis(t)
	c := newCluster(t, "w1", "w2")
	for _, w := range c.workers {
		w.Store(1, 2, 3)
	}
	r, st := c.startRouter(t, "-redis-addr", redis.Addr, "-snapshot-interval", "1h", "-namespace", t.Name())
	synced := func() bool {
		dump := st.index.Dump()
		for id, w := range c.workers {
			if dump[id].Next != w.State().Next || len(dump[id].Blocks) != 3 {
				return false
			}
		}
		return true
	}
	deptest.Eventually(t, 20*time.Second, "synced", synced)
	r.Stop(t)
	store := snapshot.NewRedis(redis.Addr)
	defer store.Close()
	data, err := store.Load(t.Context(), "switchyard:router:"+t.Name()+":index")
	if err != nil || data == nil {
		t.Fatalf("no snapshot after shutdown: %v", err)
	}
	saved, err := radix.Restore(data)
	if err != nil {
		t.Fatal(err)
	}
	if !saved.Equal(st.index) {
		t.Fatalf("saved index %v, router's %v", saved.Dump(), st.index.Dump())
	}
}

func TestBadRedisAddr(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	code := Main(t.Context(), "v0", []string{"-discovery", "none", "-redis-addr", "nohostport"}, &stderr, &stderr, nil)
	if code != 2 || !strings.Contains(stderr.String(), "-redis-addr") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// Two replicas routing one burst see each other's decisions: alternating
// requests on cold workers land on distinct workers, as if one router
// routed them all.
func TestReplicasShareLoad(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "a", "b", "c", "d")
	ra, sa := c.startRouter(t)
	rb, sb := c.startRouter(t)
	routers := []*meshtest.Running{ra, rb}
	stacks := []*stack{sa, sb}
	// Fixed probe ids replace themselves, so once each router holds both
	// probes the peers are connected both ways.
	probe := func() bool {
		for i, s := range stacks {
			_, _ = s.router.Decide(t.Context(), &routerv1.RouteRequest{RequestId: fmt.Sprint("probe-", i), Model: "m", TokenIds: []uint32{1}})
		}
		return sa.router.Loads().Len() == 2 && sb.router.Loads().Len() == 2
	}
	deptest.Eventually(t, 20*time.Second, "routers see workers and each other", probe)
	for i, r := range routers {
		client := routerv1connect.NewRouterServiceClient(http.DefaultClient, r.URL())
		if _, err := client.Release(t.Context(), connect.NewRequest(&routerv1.ReleaseRequest{RequestId: fmt.Sprint("probe-", i)})); err != nil {
			t.Fatal(err)
		}
	}
	deptest.Eventually(t, 20*time.Second, "probes released", func() bool { return sa.router.Loads().Len() == 0 && sb.router.Loads().Len() == 0 })
	got := map[string]int{}
	total := 0
	for i := range 8 {
		client := routerv1connect.NewRouterServiceClient(http.DefaultClient, routers[i%2].URL())
		res, err := client.Route(t.Context(), connect.NewRequest(&routerv1.RouteRequest{RequestId: fmt.Sprint("burst-", i), Model: "m", TokenIds: tokens(64, i)}))
		if err != nil {
			t.Fatal(err)
		}
		got[res.Msg.GetDecode().GetInstanceId()]++
		total++
		deptest.Eventually(t, 20*time.Second, "load shared", func() bool {
			return sa.router.Loads().Len() == total && sb.router.Loads().Len() == total
		})
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if got[id] != 2 {
			t.Fatalf("burst split %v over two routers, want 2 each", got)
		}
	}
}

func tokens(n, seed int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(seed*1000 + i)
	}
	return out
}
