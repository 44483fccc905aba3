package s3tier_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/kvbm/s3tier"
	"switchyard.dev/libs/kvbm/tiertest"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/nixl/arena"
)

// store is one real versitygw for a test and its buckets.
type store struct {
	gw      *deptest.VersityGW
	raw     *s3.Client
	buckets atomic.Int64
}

func startStore(t *testing.T) *store {
	t.Helper()
	gw := deptest.StartVersityGW(t)
	raw := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(gw.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, "")})
	return &store{gw: gw, raw: raw}
}

func (s *store) bucket(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("kv-%d", s.buckets.Add(1))
	if _, err := s.raw.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	return name
}

func (s *store) config(bucket string, blocks, bb int, on kvbm.OnChange) s3tier.Config {
	return s3tier.Config{Endpoint: s.gw.Endpoint, Bucket: bucket, AccessKey: s.gw.AccessKey, SecretKey: s.gw.SecretKey,
		Namespace: "test-model", BlockSize: 16, BlockBytes: bb, Blocks: blocks, OnChange: on, Refresh: -1, Timeout: 5 * time.Second}
}

func open(t *testing.T, cfg s3tier.Config) *s3tier.Tier {
	t.Helper()
	tier, err := s3tier.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tier.Close() })
	return tier
}

func TestContract(t *testing.T) {
	t.Parallel()
	s := startStore(t)
	tiertest.Run(t, func(t *testing.T, cfg tiertest.Config) kvbm.Tier {
		return open(t, s.config(s.bucket(t), cfg.Blocks, cfg.BlockBytes, cfg.OnChange))
	})
}

// A block one worker wrote is found and read by another: the tier is
// shared. A worker that did not know of it and writes it too is refused by
// the conditional PUT: counted as a dedup, written once.
func TestSharedBetweenWorkers(t *testing.T) {
	t.Parallel()
	s := startStore(t)
	bucket := s.bucket(t)
	late := open(t, s.config(bucket, 64, 4096, nil)) // listed before the block existed
	a := open(t, s.config(bucket, 64, 4096, nil))
	if ok, err := a.Put(t.Context(), tiertest.Meta(1), tiertest.Data(1, 4096)); err != nil || !ok {
		t.Fatalf("Put: %v %v", ok, err)
	}
	rec := tiertest.NewRecorder()
	b := open(t, s.config(bucket, 64, 4096, rec.OnChange))
	if b.Prefix([]uint64{tiertest.Meta(1).Hash}) != 1 {
		t.Fatal("a second worker does not know the block the first wrote")
	}
	dst := make([]byte, 4096)
	m, err := b.Get(t.Context(), tiertest.Meta(1).Hash, dst)
	if err != nil || !bytes.Equal(dst, tiertest.Data(1, 4096)) || m.Parent != tiertest.Meta(1).Parent {
		t.Fatalf("the other worker's Get: %+v %v", m, err)
	}
	rec.Check(t, b)
	if late.Prefix([]uint64{tiertest.Meta(1).Hash}) != 0 {
		t.Fatal("a tier that never listed the block knows it")
	}
	if ok, err := late.Put(t.Context(), tiertest.Meta(1), tiertest.Data(1, 4096)); ok || err != nil {
		t.Fatalf("Put of a block the store has: %v, %v; want refused, no error", ok, err)
	}
	if st := late.Stats(); st.Dedups != 1 || st.Puts != 0 || late.Prefix([]uint64{tiertest.Meta(1).Hash}) != 1 {
		t.Fatalf("after the refused write: %+v; want one dedup, no put, the block known", st)
	}
	// And a refresh finds what others wrote.
	if _, err := a.Put(t.Context(), tiertest.Meta(2), tiertest.Data(2, 4096)); err != nil {
		t.Fatal(err)
	}
	if err := late.Refresh(t.Context()); err != nil || late.Prefix([]uint64{tiertest.Meta(2).Hash}) != 1 {
		t.Fatalf("Refresh: %v; the block written since is known: %v", err, late.Prefix([]uint64{tiertest.Meta(2).Hash}) == 1)
	}
}

// An object whose bytes rotted in the store, or that lost its end, is
// discarded (deleted), counted, and reported as corrupt; never served.
func TestCorruptObject(t *testing.T) {
	t.Parallel()
	s := startStore(t)
	for name, rot := range map[string]func([]byte) []byte{
		"a byte flipped": func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b },
		"truncated":      func(b []byte) []byte { return b[:len(b)-100] },
	} {
		t.Run(name, func(t *testing.T) {
			bucket := s.bucket(t)
			tier := open(t, s.config(bucket, 8, 4096, nil))
			if _, err := tier.Put(t.Context(), tiertest.Meta(3), tiertest.Data(3, 4096)); err != nil {
				t.Fatal(err)
			}
			var path string
			_ = filepath.WalkDir(filepath.Join(s.gw.Dir, bucket), func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					path = p
				}
				return nil
			})
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, rot(b), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := tier.Get(t.Context(), tiertest.Meta(3).Hash, make([]byte, 4096)); !errors.Is(err, kvbm.ErrCorrupt) {
				t.Fatalf("Get of a rotted object: %v; want ErrCorrupt", err)
			}
			if st := tier.Stats(); st.Corrupt != 1 || tier.Prefix([]uint64{tiertest.Meta(3).Hash}) != 0 {
				t.Fatalf("stats %+v: want one corrupt block, forgotten", st)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the rotted object is still in the store: %v", err)
			}
		})
	}
}

// A store that goes down fails calls fast (after a few, without waiting
// for timeouts) and never takes the tier down; once it is back the tier
// works again by itself.
func TestStoreDownAndBack(t *testing.T) {
	t.Parallel()
	s := startStore(t)
	bucket := s.bucket(t)
	cfg := s.config(bucket, 64, 4096, nil)
	cfg.Timeout = time.Second
	tier := open(t, cfg)
	if _, err := tier.Put(t.Context(), tiertest.Meta(1), tiertest.Data(1, 4096)); err != nil {
		t.Fatal(err)
	}
	s.gw.Stop()
	for i := range 5 {
		if _, err := tier.Put(t.Context(), tiertest.Meta(10+i), tiertest.Data(10+i, 4096)); err == nil {
			t.Fatal("Put to a stopped store succeeded")
		}
	}
	if _, err := tier.Get(t.Context(), tiertest.Meta(1).Hash, make([]byte, 4096)); err == nil {
		t.Fatal("Get from a stopped store succeeded")
	}
	if st := tier.Stats(); st.WriteErrors != 5 || st.ReadErrors != 1 || st.Blocks != 1 {
		t.Fatalf("after 5 failed writes and a failed read: %+v; want them counted, the written block still known", st)
	}
	s.gw.Start()
	deptest.Eventually(t, 30*time.Second, "the tier working again", func() bool {
		_, err := tier.Get(t.Context(), tiertest.Meta(1).Hash, make([]byte, 4096))
		return err == nil
	})
}

// Wrong credentials, an endpoint that does not answer and a missing bucket
// each fail at open with one line naming what to fix.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	s := startStore(t)
	bucket := s.bucket(t)
	for _, tc := range []struct {
		name string
		edit func(*s3tier.Config)
		want string
	}{
		{"wrong secret", func(c *s3tier.Config) { c.SecretKey = "wrong" }, "credentials refused"},
		{"unreachable endpoint", func(c *s3tier.Config) { c.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", deptest.FreePort(t)) }, "unreachable"},
		{"no bucket", func(c *s3tier.Config) { c.Bucket = "absent" }, `bucket "absent"`},
		{"no namespace", func(c *s3tier.Config) { c.Namespace = "" }, "namespace"},
		{"half credentials", func(c *s3tier.Config) { c.SecretKey = "" }, "secret key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := s.config(bucket, 8, 4096, nil)
			cfg.Timeout = 2 * time.Second
			tc.edit(&cfg)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			tier, err := s3tier.Open(ctx, cfg)
			if err == nil {
				_ = tier.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Open: %v; want one line containing %q", err, tc.want)
			}
		})
	}
}

// A Get into memory registered with the tier reads the block's data
// straight into it, and checks it there: a rotted object is still refused.
func TestRegisteredMemory(t *testing.T) {
	t.Parallel()
	s := startStore(t)
	bucket := s.bucket(t)
	tier := open(t, s.config(bucket, 8, 4096, nil))
	mem, err := arena.Map(4 * 4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	if err := tier.RegisterMemory(mem.Bytes()); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := tier.Put(t.Context(), tiertest.Meta(i), tiertest.Data(i, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	dst := mem.Bytes()[4096 : 2*4096]
	m, err := tier.Get(t.Context(), tiertest.Meta(1).Hash, dst)
	if err != nil || m.Hash != tiertest.Meta(1).Hash || !bytes.Equal(dst, tiertest.Data(1, 4096)) {
		t.Fatalf("Get into registered memory: %+v, %v; or the wrong bytes", m, err)
	}
	if m.Parent != tiertest.Meta(1).Parent || len(m.Tokens) != len(tiertest.Meta(1).Tokens) {
		t.Errorf("meta %+v, want %+v", m, tiertest.Meta(1))
	}
	rot(t, s, bucket, tier, tiertest.Meta(0).Hash)
	if _, err := tier.Get(t.Context(), tiertest.Meta(0).Hash, dst); !errors.Is(err, kvbm.ErrCorrupt) {
		t.Fatalf("Get of a rotted object into registered memory: %v; want ErrCorrupt", err)
	}
}

// rot flips the last byte of block hash's object on the store's disk.
func rot(t *testing.T, s *store, bucket string, tier *s3tier.Tier, hash uint64) {
	t.Helper()
	var path string
	_ = filepath.WalkDir(filepath.Join(s.gw.Dir, bucket), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, strconv.FormatUint(hash, 16)) {
			path = p
		}
		return nil
	})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
