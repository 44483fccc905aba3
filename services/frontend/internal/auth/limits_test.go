package auth

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard.dev/libs/mesh/deptest"
)

// limiters are the Limiter implementations under test: this process's,
// and Redis's shared by two guards as two frontend replicas would.
func limiters(t *testing.T, now func() time.Time) map[string][2]Limiter {
	t.Helper()
	out := map[string][2]Limiter{}
	l := NewLocal(now)
	out["local"] = [2]Limiter{l, l}
	rd := deptest.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: rd.Addr})
	t.Cleanup(func() { _ = c.Close() })
	ns := t.Name()
	out["redis"] = [2]Limiter{NewRedis(RedisConfig{Client: c, Namespace: ns}), NewRedis(RedisConfig{Client: c, Namespace: ns})}
	return out
}

// A key's requests in flight are bounded across replicas; ending one
// frees its slot; other keys are not affected.
func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	for name, ls := range limiters(t, nil) {
		t.Run(name, func(t *testing.T) {
			a := New(Config{Keys: []string{"k", "other"}, Defaults: Limits{Concurrent: 2}, Limiter: ls[0]})
			b := New(Config{Keys: []string{"k", "other"}, Defaults: Limits{Concurrent: 2}, Limiter: ls[1]})
			t1, err := a.Admit(bearerReq("k"))
			if err != nil {
				t.Fatal(err)
			}
			t2, err := b.Admit(bearerReq("k"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Admit(bearerReq("k")); err == nil || err.Status != http.StatusTooManyRequests || err.RetryAfter <= 0 {
				t.Fatalf("a third request in flight: %+v; want 429 with Retry-After", err)
			}
			if t3, err := b.Admit(bearerReq("other")); err != nil {
				t.Fatalf("another key: %v", err)
			} else {
				t3.Done()
			}
			t1.Done()
			t1.Done() // twice is once
			t4, err := b.Admit(bearerReq("k"))
			if err != nil {
				t.Fatalf("after one ended: %v", err)
			}
			if _, err := a.Admit(bearerReq("k")); err == nil {
				t.Fatal("the double Done freed two slots")
			}
			t2.Done()
			t4.Done()
		})
	}
}

// Tokens charged by one replica count on the other; the budget refills
// with time.
func TestTokensPerMinute(t *testing.T) {
	t.Parallel()
	ls := limiters(t, nil)
	for _, name := range []string{"local", "redis"} {
		t.Run(name, func(t *testing.T) {
			l := ls[name]
			lim := Limits{TokensPerMinute: 6000} // 100 a second
			a := New(Config{Keys: []string{"k"}, Defaults: lim, Limiter: l[0]})
			b := New(Config{Keys: []string{"k"}, Defaults: lim, Limiter: l[1]})
			tk, err := a.Admit(bearerReq("k"))
			if err != nil {
				t.Fatal(err)
			}
			tk.Charge(context.Background(), 6500) // overshoots the minute's budget
			tk.Done()
			_, err = b.Admit(bearerReq("k"))
			if err == nil || err.Status != http.StatusTooManyRequests {
				t.Fatalf("after the budget is spent elsewhere: %v; want 429", err)
			}
			if err.RetryAfter < 5*time.Second || err.RetryAfter > 6*time.Second {
				t.Errorf("Retry-After %v; want about the 5s to refill 501 tokens at 100/s", err.RetryAfter)
			}
		})
	}
	// The local bucket refills on its clock.
	now := time.Unix(1000, 0)
	g := New(Config{Keys: []string{"k"}, Defaults: Limits{TokensPerMinute: 60}, Now: func() time.Time { return now }})
	tk, _ := g.Admit(bearerReq("k"))
	tk.Charge(context.Background(), 61)
	tk.Done()
	if _, err := g.Admit(bearerReq("k")); err == nil {
		t.Fatal("an empty budget admitted")
	}
	now = now.Add(2 * time.Second)
	if tk, err := g.Admit(bearerReq("k")); err != nil {
		t.Fatalf("after 2s at 1 token/s: %v", err)
	} else {
		tk.Done()
	}
}

// Per-key entries override the defaults; the request rate is shared by
// replicas through Redis.
func TestRequestRateShared(t *testing.T) {
	t.Parallel()
	ls := limiters(t, nil)["redis"]
	slow, err := ParseEntry("slow rps=1 burst=2")
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := ParseEntry("fast")
	a := New(Config{Entries: []Entry{slow, fast}, Defaults: Limits{RequestsPerSecond: 1000, RequestBurst: 1000}, Limiter: ls[0]})
	b := New(Config{Entries: []Entry{slow, fast}, Defaults: Limits{RequestsPerSecond: 1000, RequestBurst: 1000}, Limiter: ls[1]})
	for i, g := range []*Guard{a, b} {
		if err := g.Check(bearerReq("slow")); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if err := a.Check(bearerReq("slow")); err == nil || err.RetryAfter <= 0 || err.RetryAfter > time.Second {
		t.Fatalf("a third within the burst of 2 across replicas: %+v; want 429 within a second", err)
	}
	for i := range 10 {
		if err := b.Check(bearerReq("fast")); err != nil {
			t.Fatalf("fast request %d: %v", i, err)
		}
	}
}

// A Redis that does not answer admits (limits are not a reason to refuse
// service) instead of failing requests.
func TestRedisDownAdmits(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	g := New(Config{Keys: []string{"k"}, Defaults: Limits{Concurrent: 1}, Limiter: NewRedis(RedisConfig{Client: c})})
	tk, err := g.Admit(bearerReq("k"))
	if err != nil {
		t.Fatalf("redis down: %v", err)
	}
	tk.Done()
	if _, err := g.Admit(bearerReq("nope")); err == nil || err.Status != http.StatusUnauthorized {
		t.Fatalf("a wrong key with redis down: %v; want 401", err)
	}
}

// A changed keys file applies without a restart; one that no longer
// parses keeps the keys in force.
func TestWatchReloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := Source{KeysFile: path}
	entries, err := src.Load()
	if err != nil {
		t.Fatal(err)
	}
	g := New(Config{Entries: entries})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go g.Watch(ctx, src, 10*time.Millisecond, discard())
	if err := os.WriteFile(path, []byte("new admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deptest.Eventually(t, 10*time.Second, "the new key accepted", func() bool { return g.Check(bearerReq("new")) == nil })
	if g.Check(bearerReq("old")) == nil || !g.Admin(bearerReq("new")) {
		t.Fatal("after the reload: the old key still passes or the new one is not admin")
	}
	if err := os.WriteFile(path, []byte("new\nbroken rps=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // several polls
	if g.Check(bearerReq("new")) != nil || !g.Admin(bearerReq("new")) {
		t.Fatal("a file that does not parse changed the keys in force")
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
