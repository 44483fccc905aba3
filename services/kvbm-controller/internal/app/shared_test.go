package app

import (
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	kvbmv1 "switchyard.dev/gen/switchyard/kvbm/v1"
	"switchyard.dev/gen/switchyard/kvbm/v1/kvbmv1connect"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/kvbm/s3tier"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/libs/mesh/service"
)

func TestByteSize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want byteSize
		ok   bool
	}{
		{"0", 0, true}, {"1024", 1024, true}, {"64MiB", 64 << 20, true}, {"500GB", 500e9, true}, {"2 TiB", 2 << 40, true}, {"7B", 7, true},
		{"", 0, false}, {"-1", 0, false}, {"1.5GiB", 0, false}, {"10XB", 0, false}, {"9999999TiB", 0, false},
	} {
		var b byteSize
		err := b.Set(tt.in)
		if (err == nil) != tt.ok || (tt.ok && b != tt.want) {
			t.Errorf("Set(%q) = %d, %v; want %d, ok %t", tt.in, b, err, tt.want, tt.ok)
		}
	}
	if s := byteSize(64 << 20).String(); s != "64MiB" {
		t.Errorf("String = %q", s)
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"-s3-bucket", "b", "-s3-capacity", "1GiB", "-s3-ttl", "24h"}, true},
		{[]string{"-s3-capacity", "1GiB"}, false},
		{[]string{"-s3-bucket", "b", "-s3-ttl", "-1s"}, false},
		{[]string{"-s3-bucket", "b", "-s3-reconcile", "0s"}, false},
	} {
		f := &flags{}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.register(fs)
		err := fs.Parse(tt.args)
		if err == nil {
			err = f.validate()
		}
		if (err == nil) != tt.ok {
			t.Errorf("%v: err %v, want ok %t", tt.args, err, tt.ok)
		}
	}
}

// Without a bucket the controller lists pools and refuses the shared
// tier's calls with FailedPrecondition.
func TestNoSharedTier(t *testing.T) {
	t.Parallel()
	r := meshtest.Start(t, Spec("v0.0.0-test"), "-listen", "127.0.0.1:0", "-discovery", "none")
	c := kvbmv1connect.NewKvbmControllerServiceClient(http.DefaultClient, r.URL())
	_, err := c.ReportSharedBlocks(t.Context(), connect.NewRequest(&kvbmv1.ReportSharedBlocksRequest{}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("report: %v; want FailedPrecondition", err)
	}
}

// The catalog's RPCs against a real versitygw: reports fill it, the
// stream dumps it and resumes after a sequence, ListPools shows the
// shared pool, bad input gets InvalidArgument, a position from another
// run OutOfRange, and a wrong bucket fails start-up naming the flag.
func TestSharedTierRPCs(t *testing.T) {
	gw := deptest.StartVersityGW(t)
	t.Setenv("AWS_ACCESS_KEY_ID", gw.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", gw.SecretKey)
	raw, err := s3tier.NewClient(t.Context(), s3tier.ClientConfig{Endpoint: gw.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("switchyard-kv")}); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	code := service.Run(t.Context(), Spec("v0.0.0-test"), service.Env{Args: []string{"-listen", "127.0.0.1:0", "-discovery", "none",
		"-s3-endpoint", gw.Endpoint, "-s3-bucket", "no-such-bucket"}, Stdout: io.Discard, Stderr: &stderr, Getenv: os.Getenv})
	if code == 0 || !strings.Contains(stderr.String(), "-s3-bucket") || !strings.Contains(stderr.String(), "no such bucket") {
		t.Fatalf("start-up with a missing bucket: exit %d, %q; want a failure naming -s3-bucket", code, stderr.String())
	}
	r := meshtest.Start(t, Spec("v0.0.0-test"), "-listen", "127.0.0.1:0", "-discovery", "none", "-id", "kvbm-t",
		"-s3-endpoint", gw.Endpoint, "-s3-bucket", "switchyard-kv")
	c := kvbmv1connect.NewKvbmControllerServiceClient(http.DefaultClient, r.URL())
	ns := &kvbmv1.SharedNamespace{Model: "org/model", BlockSize: 16, BlockBytes: 1000}
	report := func(req *kvbmv1.ReportSharedBlocksRequest) error {
		_, err := c.ReportSharedBlocks(t.Context(), connect.NewRequest(req))
		return err
	}
	if err := report(&kvbmv1.ReportSharedBlocksRequest{Namespace: ns, Written: []*kvbmv1.SharedBlock{{Hash: 1, Bytes: 1100}, {Hash: 2, Bytes: 1100}},
		WriteBytes: 2200, WriteNanos: 1e6}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []*kvbmv1.ReportSharedBlocksRequest{
		{},
		{Namespace: &kvbmv1.SharedNamespace{Model: "m", BlockBytes: 1}},
		{Namespace: &kvbmv1.SharedNamespace{Model: "m", BlockSize: 16}},
		{Namespace: ns, Read: make([]uint64, maxReportBlocks+1)},
	} {
		if err := report(bad); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("report %v: %v; want InvalidArgument", bad, err)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := c.SubscribeSharedEvents(ctx, connect.NewRequest(&kvbmv1.SubscribeSharedEventsRequest{Model: "org/model", BlockSize: 16, Dump: true}))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() {
		t.Fatal(st.Err())
	}
	dump := st.Msg().GetBatch()
	if !dump.GetDump() || !dump.GetDumpComplete() || len(hashes(dump)) != 2 {
		t.Fatalf("dump %v", dump)
	}
	if err := report(&kvbmv1.ReportSharedBlocksRequest{Namespace: ns, Written: []*kvbmv1.SharedBlock{{Hash: 3, Bytes: 1100}}, Gone: []uint64{1}}); err != nil {
		t.Fatal(err)
	}
	if !st.Receive() {
		t.Fatal(st.Err())
	}
	live := st.Msg().GetBatch()
	if live.GetSequence() != dump.GetSequence()+1 || live.GetDump() {
		t.Fatalf("live batch %v after dump at %d", live, dump.GetSequence())
	}
	var stored, removed []uint64
	for _, e := range live.GetEvents() {
		if s := e.GetStored(); s != nil {
			stored = append(stored, s.GetBlockHashes()...)
			if s.GetTier() != commonv1.StorageTier_STORAGE_TIER_EXTERNAL {
				t.Fatalf("tier %v", s.GetTier())
			}
		}
		if rm := e.GetRemoved(); rm != nil {
			removed = append(removed, rm.GetBlockHashes()...)
		}
	}
	if len(stored) != 1 || stored[0] != 3 || len(removed) != 1 || removed[0] != 1 {
		t.Fatalf("live batch stored %v removed %v", stored, removed)
	}
	st.Close()

	// Resuming after the dump replays the live batch.
	st, err = c.SubscribeSharedEvents(ctx, connect.NewRequest(&kvbmv1.SubscribeSharedEventsRequest{Model: "org/model", BlockSize: 16, AfterSequence: dump.GetSequence()}))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() || st.Msg().GetBatch().GetSequence() != live.GetSequence() {
		t.Fatalf("resume: %v %v", st.Msg(), st.Err())
	}
	st.Close()
	st, _ = c.SubscribeSharedEvents(ctx, connect.NewRequest(&kvbmv1.SubscribeSharedEventsRequest{Model: "org/model", BlockSize: 16, AfterSequence: live.GetSequence() + 100}))
	if st.Receive() || connect.CodeOf(st.Err()) != connect.CodeOutOfRange {
		t.Fatalf("a position ahead of the stream: %v; want OutOfRange", st.Err())
	}
	st.Close()
	st, _ = c.SubscribeSharedEvents(ctx, connect.NewRequest(&kvbmv1.SubscribeSharedEventsRequest{BlockSize: 16}))
	if st.Receive() || connect.CodeOf(st.Err()) != connect.CodeInvalidArgument {
		t.Fatalf("no model: %v; want InvalidArgument", st.Err())
	}
	st.Close()

	res, err := c.ListPools(t.Context(), connect.NewRequest(&kvbmv1.ListPoolsRequest{Model: "org/model"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Msg.GetPools()) != 1 {
		t.Fatalf("pools %v", res.Msg.GetPools())
	}
	p := res.Msg.GetPools()[0]
	if p.GetInstanceId() != "kvbm-t" || p.GetTier() != commonv1.StorageTier_STORAGE_TIER_EXTERNAL || p.GetUsedBlocks() != 2 ||
		p.GetUsedBytes() != 2200 || p.GetBlockSize() != 16 || p.GetWriteBytesPerSecond() != 2.2e6 {
		t.Fatalf("shared pool %v", p)
	}
	mres, err := http.Get(r.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(mres.Body)
	mres.Body.Close()
	for _, want := range []string{`switchyard_kvbm_shared_blocks{block_bytes="1000",block_size="16",model="org/model",namespace="org%2Fmodel"`, "switchyard_kvbm_shared_listings_total",
		`switchyard_kvbm_shared_write_bytes_total{block_bytes="1000",block_size="16",model="org/model",namespace="org%2Fmodel"} 2200`,
		"switchyard_kvbm_shared_write_seconds_total{", "switchyard_kvbm_shared_read_bytes_total{", "switchyard_kvbm_shared_read_seconds_total{"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func hashes(m *workerv1.SubscribeKvEventsResponse) []uint64 {
	var out []uint64
	for _, e := range m.GetEvents() {
		out = append(out, e.GetStored().GetBlockHashes()...)
	}
	return out
}
