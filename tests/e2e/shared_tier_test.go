package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	kvbmv1 "switchyard.dev/gen/switchyard/kvbm/v1"
	"switchyard.dev/gen/switchyard/kvbm/v1/kvbmv1connect"
	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/kvbm/s3tier"
	"switchyard.dev/libs/mesh/deptest"
)

// The shared tier as one holder: two workers over one real versitygw
// bucket and a kvbm-controller keeping its catalog. A prompt served by
// worker 0 is offloaded to the store; the controller's catalog lists it
// (ListPools), the router indexes it once, as the controller's stream,
// and credits it to both workers, while neither worker's own events carry
// the shared tier. Under a byte budget the controller deletes the least
// recently used objects from the store, and the router forgets them.
func TestSharedTierCatalog(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs services with a real object store; skipped under -short")
	}
	gw := deptest.StartVersityGW(t)
	t.Setenv("AWS_ACCESS_KEY_ID", gw.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", gw.SecretKey)
	raw, err := s3tier.NewClient(t.Context(), s3tier.ClientConfig{Endpoint: gw.Endpoint, AccessKey: gw.AccessKey, SecretKey: gw.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	const bucket = "switchyard-kv"
	if _, err := raw.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	bin, dir := Build(t), t.TempDir()
	common := []string{"-discovery", "file", "-discovery-dir", dir, "-drain-timeout", "2s"}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t)) }
	// The budget holds about 24 of the tiny model's block objects.
	const capacity = 24 * 20800
	ctrl := Start(t, bin, "kvbm-controller", addr(), append([]string{"-id", "kvbm-0",
		"-s3-endpoint", gw.Endpoint, "-s3-bucket", bucket, "-s3-capacity", fmt.Sprint(capacity), "-s3-reconcile", "1s"}, common...)...)
	var workers []workerv1connect.WorkerServiceClient
	for i := range 2 {
		w := Start(t, bin, "decode", addr(), append([]string{"-id", fmt.Sprintf("decode-%d", i), "-num-blocks", "64",
			"-kv-s3-endpoint", gw.Endpoint, "-kv-s3-bucket", bucket, "-kv-s3-blocks", "4096"}, common...)...)
		workers = append(workers, workerv1connect.NewWorkerServiceClient(http.DefaultClient, "http://"+w.Addr))
	}
	router := Start(t, bin, "router", addr(), append([]string{"-id", "router-0"}, common...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(ctrl.Log())
		}
	})
	rc := routerv1connect.NewRouterServiceClient(http.DefaultClient, "http://"+router.Addr)
	kc := kvbmv1connect.NewKvbmControllerServiceClient(http.DefaultClient, "http://"+ctrl.Addr)

	prompt := func(n int) []uint32 {
		p := make([]uint32, 8*16+3) // 8 whole blocks
		for j := range p {
			p[j] = uint32(3 + (j*7+n*13)%200)
		}
		return p
	}
	generate := func(w workerv1connect.WorkerServiceClient, p []uint32) {
		t.Helper()
		st, err := w.Generate(t.Context(), connect.NewRequest(&workerv1.GenerateRequest{RequestId: fmt.Sprint(p[:4]),
			Model: "tiny-random", TokenIds: p, Stop: &commonv1.StopConditions{MaxTokens: 2, IgnoreEos: true}}))
		if err != nil {
			t.Fatal(err)
		}
		for st.Receive() {
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
	}
	overlaps := func(p []uint32) map[string]uint32 {
		t.Helper()
		res, err := rc.Route(t.Context(), connect.NewRequest(&routerv1.RouteRequest{Model: "tiny-random", TokenIds: p}))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint32{}
		for _, c := range res.Msg.GetCandidates() {
			out[c.GetInstanceId()] = c.GetOverlapBlocks()
		}
		return out
	}
	shared := func() *kvbmv1.Pool {
		res, err := kc.ListPools(t.Context(), connect.NewRequest(&kvbmv1.ListPoolsRequest{Model: "tiny-random"}))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range res.Msg.GetPools() {
			if p.GetTier() == commonv1.StorageTier_STORAGE_TIER_EXTERNAL {
				return p
			}
		}
		return nil
	}

	first := prompt(0)
	generate(workers[0], first)
	deptest.Eventually(t, 30*time.Second, "the prompt's blocks in the catalog and credited to both workers", func() bool {
		p, o := shared(), overlaps(first)
		return p != nil && p.GetUsedBlocks() >= 8 && o["decode-0"] >= 8 && o["decode-1"] >= 8
	})
	if p := shared(); p.GetInstanceId() != "kvbm-0" || p.GetUsedBytes() == 0 || p.GetCapacityBytes() != capacity || p.GetWriteBytesPerSecond() <= 0 {
		t.Fatalf("shared pool %v", p)
	}
	for i, w := range workers {
		if n := externalBlocks(t, w); n != 0 {
			t.Fatalf("decode-%d's own events carry %d shared-tier blocks; the controller publishes them", i, n)
		}
	}

	// Fill the store past its budget: the first prompt, used least
	// recently, leaves it.
	for n := 1; n <= 6; n++ {
		generate(workers[n%2], prompt(n))
	}
	countObjects := func() int {
		n := 0
		pages := s3.NewListObjectsV2Paginator(raw, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(s3tier.Root)})
		for pages.HasMorePages() {
			page, err := pages.NextPage(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			n += len(page.Contents)
		}
		return n
	}
	// The workers' reports trail their writes by a fraction of a second:
	// wait for the store and the catalog to agree.
	var objects int
	deptest.Eventually(t, 30*time.Second, "the budget enforced on the store and the first prompt forgotten", func() bool {
		p := shared()
		objects = countObjects()
		return p != nil && p.GetUsedBytes() <= capacity && uint64(objects) == p.GetUsedBlocks() && overlaps(first)["decode-1"] == 0
	})
	if p := shared(); objects < 16 || p.GetUsedBytes() > capacity {
		t.Fatalf("the bucket holds %d objects; the catalog %d blocks, %d bytes (budget %d)", objects, p.GetUsedBlocks(), p.GetUsedBytes(), capacity)
	}
	// A worker onboarding the evicted prompt finds it gone and computes it:
	// the request succeeds.
	generate(workers[1], first)
}

// externalBlocks counts the shared-tier blocks in a worker's own dump.
func externalBlocks(t *testing.T, w workerv1connect.WorkerServiceClient) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := w.SubscribeKvEvents(ctx, connect.NewRequest(&workerv1.SubscribeKvEventsRequest{Dump: true, OmitTokenIds: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := 0
	for st.Receive() {
		for _, e := range st.Msg().GetEvents() {
			if s := e.GetStored(); s != nil && s.GetTier() == commonv1.StorageTier_STORAGE_TIER_EXTERNAL {
				n += len(s.GetBlockHashes())
			}
		}
		if st.Msg().GetDumpComplete() {
			return n
		}
	}
	t.Fatalf("dump ended early: %v", st.Err())
	return 0
}
