package obj_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/nixltest"
)

// BenchmarkObj: whole-object WRITEs and READs through the agent against a
// real versitygw, as nixltest.BenchStorage shapes them; BenchmarkSDK is
// the same shape in bare PutObject/GetObject calls of a client set up as
// the backend's is, the baseline.
func BenchmarkObj(b *testing.B) {
	nixltest.BenchStorage(b, startStore(b).setup(nil))
}

func BenchmarkSDK(b *testing.B) {
	s := startStore(b)
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.gw.Endpoint), UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(s.gw.AccessKey, s.gw.SecretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired})
	for _, put := range []bool{true, false} {
		for _, size := range nixltest.BenchSizes {
			name := "GetObject"
			if put {
				name = "PutObject"
			}
			b.Run(fmt.Sprintf("%s/%s", name, nixltest.SizeName(size)), func(b *testing.B) {
				benchSDK(b, client, s.bucket(b), put, size)
			})
		}
	}
}

// benchSDK: BenchDepth goroutines, each one call of size bytes at a time
// on an object and memory of its own.
func benchSDK(b *testing.B, client *s3.Client, bucket string, put bool, size int) {
	ar, err := arena.Map(max(size*nixltest.BenchDepth, arena.HugePage))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ar.Close() })
	slot := func(i int) []byte { return ar.Bytes()[i*size : (i+1)*size] }
	key := func(i int) *string { return aws.String(fmt.Sprintf("raw/%d", i)) }
	putObject := func(i int) error {
		_, err := client.PutObject(b.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: key(i),
			Body: bytes.NewReader(slot(i)), ContentLength: aws.Int64(int64(size))})
		return err
	}
	for i := range nixltest.BenchDepth { // as the agent's warm-up
		if err := putObject(i); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	nixltest.RawWindow(b, nixltest.BenchDepth, func(i int) error {
		if put {
			return putObject(i)
		}
		out, err := client.GetObject(b.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: key(i)})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		_, err = io.ReadFull(out.Body, slot(i))
		return err
	})
}
