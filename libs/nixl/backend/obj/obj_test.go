package obj_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/obj"
	"switchyard.dev/libs/nixl/nixltest"
)

// store is one real versitygw and a bare SDK client to it, which checks
// what the backend stored behind its back.
type store struct {
	gw      *deptest.VersityGW
	raw     *s3.Client
	buckets atomic.Int64
}

func startStore(tb testing.TB) *store {
	tb.Helper()
	gw := deptest.StartVersityGW(tb)
	raw := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(gw.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, "")})
	return &store{gw: gw, raw: raw}
}

func (s *store) bucket(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("nixl-%d", s.buckets.Add(1))
	if _, err := s.raw.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		tb.Fatal(err)
	}
	return name
}

func (s *store) config(bucket string) obj.Config {
	return obj.Config{Endpoint: s.gw.Endpoint, Bucket: bucket, AccessKey: s.gw.AccessKey, SecretKey: s.gw.SecretKey, Timeout: 10 * time.Second}
}

// setup gives each suite case a bucket of its own, and each segment a
// fresh key in it.
func (s *store) setup(tune func(*obj.Config)) nixltest.StorageSetup {
	return func(tb testing.TB) (nixl.StorageFactory, nixltest.NewSegment) {
		cfg := s.config(s.bucket(tb))
		if tune != nil {
			tune(&cfg)
		}
		var n atomic.Int64
		return obj.New(cfg), func(_ testing.TB, size int) nixl.Segment {
			return nixl.ObjectSegment{Key: fmt.Sprintf("kv/block-%d", n.Add(1)), Len: uint64(size)}
		}
	}
}

func TestContract(t *testing.T) {
	t.Parallel()
	s := startStore(t)
	for _, tc := range []struct {
		name string
		tune func(*obj.Config)
	}{
		{"defaults", nil},
		{"reads in 64 KiB parts, 2 in flight", func(c *obj.Config) { c.PartSize, c.Depth = 64<<10, 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) { nixltest.RunStorage(t, s.setup(tc.tune)) })
	}
}

// node is an agent with object storage and an arena.
type node struct {
	agent  *nixl.Agent
	mem    []byte
	region nixl.RegionID
}

func newNode(t *testing.T, cfg obj.Config, size int) *node {
	t.Helper()
	a, err := nixl.NewAgent(nixl.Config{Name: "self", Storage: []nixl.StorageFactory{obj.New(cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := arena.Map(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = a.Close()
		_ = ar.Close()
	})
	id, err := a.RegisterMemory(ar.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return &node{agent: a, mem: ar.Bytes(), region: id}
}

func (n *node) object(t *testing.T, key string, size int) nixl.RegionID {
	t.Helper()
	id, err := n.agent.RegisterStorage(nixl.ObjectSegment{Key: key, Len: uint64(size)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (n *node) start(t *testing.T, op nixl.Op, local, remote []nixl.Desc) *nixl.Xfer {
	t.Helper()
	x, err := n.agent.Post(nixl.XferRequest{Op: op, Peer: n.agent.Name(), Local: local, Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func (n *node) post(t *testing.T, op nixl.Op, local, remote []nixl.Desc) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return n.start(t, op, local, remote).Wait(ctx)
}

func (s *store) get(t *testing.T, bucket, key string) ([]byte, error) {
	t.Helper()
	out, err := s.raw.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

func (s *store) put(t *testing.T, bucket, key string, data []byte) {
	t.Helper()
	if _, err := s.raw.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
}

// TestWholeObjectWrites: a WRITE that is not one whole object is refused
// before anything is stored.
func TestWholeObjectWrites(t *testing.T) {
	t.Parallel()
	s := startStore(t)
	bucket := s.bucket(t)
	n := newNode(t, s.config(bucket), 1<<20)
	id := n.object(t, "kv/a", 8192)
	for _, tc := range []struct {
		name          string
		local, remote []nixl.Desc
	}{
		{"offset", []nixl.Desc{{Region: n.region, Len: 4096}}, []nixl.Desc{{Region: id, Offset: 4096, Len: 4096}}},
		{"short", []nixl.Desc{{Region: n.region, Len: 4096}}, []nixl.Desc{{Region: id, Len: 4096}}},
		{"in two halves", []nixl.Desc{{Region: n.region, Len: 4096}, {Region: n.region, Offset: 4096, Len: 4096}},
			[]nixl.Desc{{Region: id, Len: 4096}, {Region: id, Offset: 4096, Len: 4096}}},
		{"twice", []nixl.Desc{{Region: n.region, Len: 8192}, {Region: n.region, Len: 8192}},
			[]nixl.Desc{{Region: id, Len: 8192}, {Region: id, Len: 8192}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := n.post(t, nixl.Write, tc.local, tc.remote); !errors.Is(err, obj.ErrPartialWrite) {
				t.Fatalf("WRITE: %v, want ErrPartialWrite", err)
			}
			if _, err := s.get(t, bucket, "kv/a"); err == nil {
				t.Fatal("a refused WRITE stored the object")
			}
		})
	}
}

// TestNoOverwrite: with conditional PUTs the first writer's object stays,
// and the second learns it from ErrExists; without, the last one wins.
func TestNoOverwrite(t *testing.T) {
	t.Parallel()
	s := startStore(t)
	bucket := s.bucket(t)
	for _, noOverwrite := range []bool{true, false} {
		t.Run(fmt.Sprintf("NoOverwrite=%v", noOverwrite), func(t *testing.T) {
			cfg := s.config(bucket)
			cfg.NoOverwrite = noOverwrite
			n := newNode(t, cfg, 1<<20)
			key := fmt.Sprintf("kv/first-%v", noOverwrite)
			id := n.object(t, key, 4096)
			first, second := []nixl.Desc{{Region: n.region, Len: 4096}}, []nixl.Desc{{Region: n.region, Offset: 4096, Len: 4096}}
			copy(n.mem, bytes.Repeat([]byte{1}, 4096))
			copy(n.mem[4096:], bytes.Repeat([]byte{2}, 4096))
			remote := []nixl.Desc{{Region: id, Len: 4096}}
			if err := n.post(t, nixl.Write, first, remote); err != nil {
				t.Fatal(err)
			}
			err := n.post(t, nixl.Write, second, remote)
			want := n.mem[4096:8192]
			if noOverwrite {
				if !errors.Is(err, obj.ErrExists) {
					t.Fatalf("second conditional WRITE: %v, want ErrExists", err)
				}
				want = n.mem[:4096]
			} else if err != nil {
				t.Fatal(err)
			}
			if got, err := s.get(t, bucket, key); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("object after two WRITEs (err %v): starts %v, want %v", err, got[:1], want[:1])
			}
		})
	}
}

// TestReadErrors: a missing object is ErrNotFound; an object shorter than
// its region fails READs past its end as out of range, in a range that
// starts inside it and one that starts past it.
func TestReadErrors(t *testing.T) {
	t.Parallel()
	s := startStore(t)
	bucket := s.bucket(t)
	s.put(t, bucket, "kv/short", bytes.Repeat([]byte{9}, 100))
	n := newNode(t, s.config(bucket), 1<<20)
	missing := n.object(t, "kv/missing", 4096)
	short := n.object(t, "kv/short", 4096)
	for _, tc := range []struct {
		name   string
		remote nixl.Desc
		want   error
	}{
		{"missing", nixl.Desc{Region: missing, Len: 64}, obj.ErrNotFound},
		{"over the end", nixl.Desc{Region: short, Offset: 50, Len: 64}, nixl.ErrOutOfRange},
		{"past the end", nixl.Desc{Region: short, Offset: 200, Len: 64}, nixl.ErrOutOfRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := n.post(t, nixl.Read, []nixl.Desc{{Region: n.region, Len: tc.remote.Len}}, []nixl.Desc{tc.remote})
			if !errors.Is(err, tc.want) {
				t.Fatalf("READ: %v, want %v", err, tc.want)
			}
		})
	}
	if err := n.post(t, nixl.Read, []nixl.Desc{{Region: n.region, Len: 100}}, []nixl.Desc{{Region: short, Len: 100}}); err != nil || n.mem[99] != 9 {
		t.Fatalf("READ of what the object holds: %v", err)
	}
}

// TestUnresponsiveStore: a store that accepts connections and never
// answers costs a call its timeout, and a cancel ends the transfer at
// once, not after the timeout.
func TestUnresponsiveStore(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		cancel  bool
		want    error
	}{
		{"timeout", 300 * time.Millisecond, false, context.DeadlineExceeded},
		{"cancel", time.Hour, true, nixl.ErrCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := obj.Config{Endpoint: "http://" + ln.Addr().String(), Bucket: "b", AccessKey: "k", SecretKey: "s", Timeout: tc.timeout}
			n := newNode(t, cfg, 1<<20)
			id := n.object(t, "kv/x", 4096)
			start := time.Now()
			x := n.start(t, nixl.Read, []nixl.Desc{{Region: n.region, Len: 4096}}, []nixl.Desc{{Region: id, Len: 4096}})
			if tc.cancel {
				time.Sleep(50 * time.Millisecond) // the call is in flight
				x.Cancel()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			if err := x.Wait(ctx); !errors.Is(err, tc.want) {
				t.Fatalf("READ from a silent store: %v, want %v", err, tc.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  obj.Config
	}{
		{"no bucket", obj.Config{}},
		{"key without secret", obj.Config{Bucket: "b", AccessKey: "k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := nixl.NewAgent(nixl.Config{Name: "a", Storage: []nixl.StorageFactory{obj.New(tc.cfg)}}); err == nil {
				t.Fatal("agent with a bad object store config")
			}
		})
	}
	a, err := nixl.NewAgent(nixl.Config{Name: "a", Storage: []nixl.StorageFactory{obj.New(obj.Config{Bucket: "b", AccessKey: "k", SecretKey: "s"})}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, seg := range []nixl.ObjectSegment{{Len: 1}, {Key: string(make([]byte, 1025)), Len: 1}} {
		if _, err := a.RegisterStorage(seg); err == nil {
			t.Fatalf("registered an object with a key of %d bytes", len(seg.Key))
		}
	}
}

// countGets counts the GETs a client sends.
type countGets struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (c *countGets) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		c.n.Add(1)
	}
	return c.next.RoundTrip(r)
}

// READ descriptors that continue each other in one object are one ranged
// GET, scattered into their buffers; a gap, or the part size, starts
// another.
func TestScatteredRead(t *testing.T) {
	t.Parallel()
	s := startStore(t)
	bucket := s.bucket(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB
	s.put(t, bucket, "kv/scatter", data)
	gets := &countGets{next: http.DefaultTransport}
	cfg := obj.Config{Bucket: bucket, PartSize: 12 << 10, Client: s3.New(s3.Options{Region: "us-east-1",
		BaseEndpoint: aws.String(s.gw.Endpoint), UsePathStyle: true, HTTPClient: &http.Client{Transport: gets},
		Credentials: credentials.NewStaticCredentialsProvider(s.gw.AccessKey, s.gw.SecretKey, "")})}
	n := newNode(t, cfg, 64<<10)
	id := n.object(t, "kv/scatter", len(data))
	for _, tc := range []struct {
		name   string
		local  []nixl.Desc // into n.mem
		remote []nixl.Desc
		gets   int64
	}{
		{"two contiguous ranges", []nixl.Desc{{Region: n.region, Offset: 40000, Len: 100}, {Region: n.region, Offset: 0, Len: 4000}},
			[]nixl.Desc{{Region: id, Offset: 0, Len: 100}, {Region: id, Offset: 100, Len: 4000}}, 1},
		{"a gap", []nixl.Desc{{Region: n.region, Offset: 0, Len: 100}, {Region: n.region, Offset: 100, Len: 100}},
			[]nixl.Desc{{Region: id, Offset: 0, Len: 100}, {Region: id, Offset: 200, Len: 100}}, 2},
		{"past the part size", []nixl.Desc{{Region: n.region, Offset: 0, Len: 8 << 10}, {Region: n.region, Offset: 20 << 10, Len: 8 << 10}},
			[]nixl.Desc{{Region: id, Offset: 0, Len: 8 << 10}, {Region: id, Offset: 8 << 10, Len: 8 << 10}}, 2},
	} {
		clear(n.mem)
		before := gets.n.Load()
		if err := n.post(t, nixl.Read, tc.local, tc.remote); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := gets.n.Load() - before; got != tc.gets {
			t.Errorf("%s: %d GETs, want %d", tc.name, got, tc.gets)
		}
		for i, l := range tc.local {
			r := tc.remote[i]
			if got, want := n.mem[l.Offset:l.Offset+l.Len], data[r.Offset:r.Offset+r.Len]; !bytes.Equal(got, want) {
				t.Errorf("%s: descriptor %d read the wrong bytes", tc.name, i)
			}
		}
	}
}
