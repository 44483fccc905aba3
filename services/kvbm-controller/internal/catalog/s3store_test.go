package catalog

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/kvbm/s3tier"
	"switchyard.dev/libs/mesh/deptest"
)

// Against a real versitygw: the catalog lists what a worker's tier wrote,
// and its budget deletes objects from the store.
func TestS3Store(t *testing.T) {
	t.Parallel()
	gw := deptest.StartVersityGW(t)
	client, err := s3tier.NewClient(t.Context(), s3tier.ClientConfig{Endpoint: gw.Endpoint, AccessKey: gw.AccessKey, SecretKey: gw.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	const bucket = "switchyard-kv"
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	tier, err := s3tier.Open(t.Context(), s3tier.Config{Endpoint: gw.Endpoint, Bucket: bucket, AccessKey: gw.AccessKey, SecretKey: gw.SecretKey,
		Namespace: "m", BlockSize: 16, BlockBytes: 1000, Blocks: 100, Refresh: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer tier.Close()
	for h := range uint64(4) {
		if _, err := tier.Put(t.Context(), kvbm.Meta{Hash: h + 1, Parent: h}, make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	store := &S3{Client: client, Bucket: bucket}
	if err := store.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := New(Config{Store: store})
	if err := c.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Objects != 4 || st.Bytes < 4000 {
		t.Fatalf("catalog %+v; want the 4 objects written", st)
	}
	c.cfg.CapacityBytes = c.Stats().Bytes / 2
	c.evict(t.Context())
	out, err := client.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Contents) != 2 || c.Stats().Objects != 2 || c.Stats().Evicted != 2 {
		t.Fatalf("store holds %d objects, catalog %+v; want 2 each", len(out.Contents), c.Stats())
	}
	if err := store.Delete(t.Context(), s3tier.Root+"m/16t-1000B/ffff"); err != nil {
		t.Fatalf("deleting a missing object: %v; want nil", err)
	}
	if err := (&S3{Client: client, Bucket: "no-such-bucket"}).Check(t.Context()); err == nil {
		t.Fatal("Check of a missing bucket passed")
	}
}
