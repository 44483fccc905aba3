package s3tier

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// ClientConfig is how to reach a store.
type ClientConfig struct {
	// Endpoint is the store's URL; empty uses AWS's.
	Endpoint string
	Region   string // default us-east-1
	// AccessKey and SecretKey, when set, replace the SDK's standard
	// credential chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// AWS_PROFILE, ...).
	AccessKey, SecretKey string
	HTTPClient           *http.Client // default a fresh one
}

// NewClient returns an S3 client configured as the tier's own: path-style
// addressing (what S3-compatible stores serve), and the SDK's checksums
// only where the API requires them (a block's CRC-32C covers it end to
// end). The kvbm-controller's catalog reaches the store through it too.
func NewClient(ctx context.Context, c ClientConfig) (*s3.Client, error) {
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return nil, errors.New("kvbm: object store: an access key needs its secret key, and the reverse")
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(c.Region)}
	if c.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: c.AccessKey, SecretAccessKey: c.SecretKey, Source: "s3tier.ClientConfig"}, nil
		})))
	}
	if c.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(c.HTTPClient))
	}
	acfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("kvbm: object store: credentials: %w", err)
	}
	return s3.NewFromConfig(acfg, func(o *s3.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		o.UsePathStyle = true
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}), nil
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
