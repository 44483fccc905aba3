package s3tier

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"switchyard.dev/libs/nixl/backend/obj"
)

// ClientConfig is how to reach a store (obj.ClientConfig: the tier's
// nixl backend and the tier's own calls share one client).
type ClientConfig = obj.ClientConfig

// NewClient returns an S3 client configured as the tier's own
// (obj.NewClient: path-style, the SDK's checksums only where the API
// requires them; a block's CRC-32C covers it end to end). The
// kvbm-controller's catalog reaches the store through it too.
func NewClient(ctx context.Context, c ClientConfig) (*s3.Client, error) {
	client, err := obj.NewClient(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("kvbm: object store: %w", err)
	}
	return client, nil
}

// Explain turns a store's refusal of a call about bucket into one line a
// user can act on: credentials refused, no such bucket, or unreachable.
func Explain(bucket, endpoint string, err error) error {
	return fmt.Errorf("bucket %q at %s: %w", bucket, endpointName(endpoint), explain(err))
}

func endpointName(e string) string {
	if e == "" {
		return "the default AWS endpoint"
	}
	return e
}

// explain turns the store's refusals into what a user fixes.
func explain(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "Forbidden", "AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId", "403":
			return fmt.Errorf("credentials refused (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY): %w", err)
		case "NotFound", "NoSuchBucket", "404":
			return fmt.Errorf("no such bucket: %w", err)
		}
	}
	return fmt.Errorf("unreachable or refused: %w", err)
}
