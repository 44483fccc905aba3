package s3tier

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/nixl/arena"
)

// Block sizes: 64 KiB, and 2 MiB (a 16-token block of Llama-3-8B in fp16),
// as the other tiers' benchmarks.
var benchSizes = []int{64 << 10, 2 << 20}

// benchBlocks is how many distinct blocks a Get walks.
const benchBlocks = 64

// BenchmarkTier measures the tier's Put of new blocks and Get of known
// ones against a real versitygw, beside its baseline: the same client
// (the tier's own, so the same configuration) putting and getting objects
// of the block's size in a bare loop. The tier makes one call at a time
// (the engine's offloader and an onboarding copy each call it in turn),
// so the baseline does too.
func BenchmarkTier(b *testing.B) {
	gw := deptest.StartVersityGW(b)
	for _, size := range benchSizes {
		tier := benchTier(b, gw, size)
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 7)
		}
		b.Run(fmt.Sprintf("tier/%dKiB/put", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			base := int(tier.Stats().Puts) + benchBlocks // blocks never written: every Put is a write
			i := 0
			for b.Loop() {
				if ok, err := tier.Put(b.Context(), benchMeta(base+i), data); err != nil || !ok {
					b.Fatalf("Put: %v %v", ok, err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("tier/%dKiB/get", size>>10), func(b *testing.B) {
			for i := range benchBlocks {
				if _, err := tier.Put(b.Context(), benchMeta(i), data); err != nil {
					b.Fatal(err)
				}
			}
			// Into registered memory, as the engine reads into its arena.
			mem, err := arena.Map(size)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = mem.Close() })
			if err := tier.RegisterMemory(mem.Bytes()); err != nil {
				b.Fatal(err)
			}
			dst := mem.Bytes()
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				if _, err := tier.Get(b.Context(), benchMeta(i%benchBlocks).Hash, dst); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		sdk := sdkLoop{client: tier.client, bucket: tier.cfg.Bucket, prefix: "bare-sdk/" + strconv.Itoa(size) + "/"}
		b.Run(fmt.Sprintf("sdk/%dKiB/put", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				if err := sdk.put(b.Context(), "new-"+strconv.Itoa(i), data); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("sdk/%dKiB/get", size>>10), func(b *testing.B) {
			for i := range benchBlocks {
				if err := sdk.put(b.Context(), strconv.Itoa(i), data); err != nil {
					b.Fatal(err)
				}
			}
			dst := make([]byte, size)
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				if err := sdk.get(b.Context(), strconv.Itoa(i%benchBlocks), dst); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func benchTier(b *testing.B, gw *deptest.VersityGW, size int) *Tier {
	b.Helper()
	bucket := fmt.Sprintf("bench-%d", size)
	admin := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(gw.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, "")})
	if _, err := admin.CreateBucket(b.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		b.Fatal(err)
	}
	tier, err := Open(b.Context(), Config{Endpoint: gw.Endpoint, Bucket: bucket, AccessKey: gw.AccessKey, SecretKey: gw.SecretKey,
		Namespace: "bench", BlockSize: 16, BlockBytes: size, Blocks: 1 << 20, Refresh: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tier.Close() })
	return tier
}

// benchMeta is block i with a full block's tokens, as the engine writes.
func benchMeta(i int) kvbm.Meta {
	toks := make([]uint32, 16)
	for k := range toks {
		toks[k] = uint32(i*16 + k)
	}
	return kvbm.Meta{Hash: uint64(i)*0x9e3779b97f4a7c15 | 1, Parent: uint64(i), Tokens: toks}
}

// sdkLoop is the baseline: PutObject and GetObject of bare bytes, reading
// the body straight into the caller's buffer.
type sdkLoop struct {
	client *s3.Client
	bucket string
	prefix string
}

func (s sdkLoop) put(ctx context.Context, key string, data []byte) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))})
	return err
}

func (s sdkLoop) get(ctx context.Context, key string, dst []byte) error {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if err != nil {
		return err
	}
	defer out.Body.Close()
	_, err = io.ReadFull(out.Body, dst)
	return err
}
