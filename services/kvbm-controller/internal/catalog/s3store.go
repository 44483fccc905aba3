package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3 is a Store over a bucket of an S3-compatible object store.
type S3 struct {
	Client *s3.Client
	Bucket string
	// Timeout bounds each call (each listing page; default 10s).
	Timeout time.Duration
}

func (s *S3) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return 10 * time.Second
}

// List implements Store, a page at a time, each page with its deadline.
func (s *S3) List(ctx context.Context, prefix string, fn func(string, int64, time.Time)) error {
	p := s3.NewListObjectsV2Paginator(s.Client, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		cctx, cancel := context.WithTimeout(ctx, s.timeout())
		page, err := p.NextPage(cctx)
		cancel()
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			fn(aws.ToString(o.Key), aws.ToInt64(o.Size), aws.ToTime(o.LastModified))
		}
	}
	return nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	cctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	// S3 answers a delete of a missing key with success.
	_, err := s.Client.DeleteObject(cctx, &s3.DeleteObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	return nil
}

// Check calls the bucket, so that a wrong endpoint, bucket or credentials
// fail at start-up.
func (s *S3) Check(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	_, err := s.Client.HeadBucket(cctx, &s3.HeadBucketInput{Bucket: aws.String(s.Bucket)})
	return err
}
