// Package obj is the nixl storage backend for S3 object stores, modelled
// on NIXL's OBJ plugin: an object registered as an OBJ_SEG region (by
// its key; the bucket is the backend's) takes READs of any byte range
// into the agent's own memory (ranged GETs) and WRITEs of the whole
// object from it (one PUT), so KV blocks move between memory and a shared
// store through the same descriptor lists as every other transfer.
//
// S3 objects are immutable: no call writes part of one. A WRITE
// descriptor therefore covers its object whole (offset 0, the region's
// length, one descriptor an object in a transfer); one that does not
// fails the transfer with ErrPartialWrite before anything is sent. With
// Config.NoOverwrite every PUT is conditional (If-None-Match: *): an
// object that is there already is left as it is and the transfer fails
// with ErrExists, which a writer of content-addressed blocks reads as
// "stored first by someone else". A READ of a missing object fails with
// ErrNotFound, one past the object's end with nixl.ErrOutOfRange.
//
// READs larger than Config.PartSize are split into ranged GETs, and READ
// descriptors that continue each other in one object are joined into one
// GET scattered into their buffers (within Config.PartSize), so a block
// read as a header and its data costs one round trip;
// Config.Depth calls of a transfer are in flight at once, each bounded by
// Config.Timeout, and a cancel aborts the calls in flight. The descriptors
// of one transfer are separate objects, not one atomic write: a transfer
// that fails may have stored some of them.
//
// This module is apart from libs/nixl so that the AWS SDK is a dependency
// of the agents that store objects only.
package obj

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"switchyard.dev/libs/nixl"
)

// Name is the backend's identifier.
const Name = "obj"

// Errors of transfers, wrapped with the object's key and the store's
// answer.
var (
	// ErrExists is a conditional PUT (Config.NoOverwrite) refused with 412
	// Precondition Failed: the object is there already.
	ErrExists = errors.New("obj: object exists")
	// ErrNotFound is a READ of an object the bucket does not hold.
	ErrNotFound = errors.New("obj: no such object")
	// ErrPartialWrite is a WRITE descriptor that does not cover its object
	// whole (or a second one for the same object in one transfer).
	ErrPartialWrite = errors.New("obj: a WRITE stores a whole object")
)

// maxKey is S3's bound on an object key, in bytes.
const maxKey = 1024

// Config sets up the backend's client; zero values take defaults.
type Config struct {
	// Endpoint is the store's URL (e.g. http://127.0.0.1:7070); empty uses
	// AWS's. Addressing is path-style, which every S3-compatible store
	// serves.
	Endpoint string
	Region   string // default us-east-1
	Bucket   string // required
	// AccessKey and SecretKey, both or neither: neither takes credentials
	// from the standard chain (AWS_ACCESS_KEY_ID, AWS_PROFILE, ...).
	AccessKey, SecretKey string
	// Timeout bounds each call to the store, retries included (default
	// 30s: a PUT of a large object over a slow link takes that long).
	Timeout time.Duration
	// Depth is how many calls a transfer keeps in flight (default 8).
	Depth int
	// PartSize splits READs into ranged GETs of at most this many bytes
	// (default 8 MiB).
	PartSize int
	// NoOverwrite makes every PUT conditional (see ErrExists).
	NoOverwrite bool
	// HTTPClient is the client to the store (default the SDK's).
	HTTPClient *http.Client
	// Client, when set, is the client to the store, configured by the
	// caller (who may share it with calls that are not transfers, such as
	// listings); Endpoint, Region, the keys and HTTPClient are then unused.
	Client *s3.Client
}

func (c Config) withDefaults() (Config, error) {
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Depth <= 0 {
		c.Depth = 8
	}
	if c.PartSize <= 0 {
		c.PartSize = 8 << 20
	}
	switch {
	case c.Bucket == "":
		return c, errors.New("obj: no bucket")
	case c.Client == nil && (c.AccessKey == "") != (c.SecretKey == ""):
		return c, errors.New("obj: an access key needs its secret key, and the reverse")
	}
	return c, nil
}

// New returns a factory for obj backends. It makes no call to the store:
// a wrong endpoint, bucket or credentials fail the first transfer.
func New(cfg Config) nixl.StorageFactory {
	return func(nixl.Env) (nixl.StorageBackend, error) {
		cfg, err := cfg.withDefaults()
		if err != nil {
			return nil, err
		}
		client := cfg.Client
		if client == nil {
			if client, err = NewClient(context.Background(), ClientConfig{Endpoint: cfg.Endpoint, Region: cfg.Region,
				AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey, HTTPClient: cfg.HTTPClient}); err != nil {
				return nil, err
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		return &Backend{cfg: cfg, client: client, ctx: ctx, cancel: cancel, objs: map[nixl.RegionID]object{}}, nil
	}
}

// ClientConfig is how to reach a store.
type ClientConfig struct {
	// Endpoint is the store's URL; empty uses AWS's.
	Endpoint string
	Region   string // default us-east-1
	// AccessKey and SecretKey, when set, replace the SDK's standard
	// credential chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// AWS_PROFILE, ...).
	AccessKey, SecretKey string
	HTTPClient           *http.Client // default the SDK's
}

// NewClient returns an S3 client set up as the backend's own: path-style
// addressing (what S3-compatible stores serve), and the SDK's checksums
// only where the API requires them (KV blocks carry their own where they
// need them; the SDK's would hash every byte once more on each side).
// libs/kvbm's object tier and the kvbm-controller reach stores through it.
func NewClient(ctx context.Context, c ClientConfig) (*s3.Client, error) {
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return nil, errors.New("obj: an access key needs its secret key, and the reverse")
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(c.Region)}
	if c.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: c.AccessKey, SecretAccessKey: c.SecretKey, Source: "obj.ClientConfig"}, nil
		})))
	}
	if c.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(c.HTTPClient))
	}
	acfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("obj: credentials: %w", err)
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

// Backend is one agent's object-store backend.
type Backend struct {
	cfg    Config
	client *s3.Client
	ctx    context.Context // canceled by Close: aborts every call
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	objs   map[nixl.RegionID]object
}

type object struct {
	key  string
	size int
}

// Name implements nixl.StorageBackend.
func (b *Backend) Name() string { return Name }

// Kind implements nixl.StorageBackend.
func (b *Backend) Kind() nixl.SegKind { return nixl.ObjSeg }

// RegisterStorage implements nixl.StorageBackend: seg must be a
// nixl.ObjectSegment with a key. The object need not exist: a WRITE
// creates it.
func (b *Backend) RegisterStorage(id nixl.RegionID, seg nixl.Segment) error {
	o, ok := seg.(nixl.ObjectSegment)
	switch {
	case !ok:
		return fmt.Errorf("obj: %T is not a nixl.ObjectSegment", seg)
	case o.Key == "" || len(o.Key) > maxKey:
		return fmt.Errorf("obj: object key of %d bytes: want 1 to %d", len(o.Key), maxKey)
	case o.Len > math.MaxInt:
		return fmt.Errorf("obj: object of %d bytes", o.Len)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nixl.ErrClosed
	}
	b.objs[id] = object{key: o.Key, size: int(o.Len)}
	return nil
}

// DeregisterStorage implements nixl.StorageBackend; the object stays in
// the store.
func (b *Backend) DeregisterStorage(id nixl.RegionID) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objs, id)
	return nil
}

// Close aborts the calls in flight, fails their transfers with
// nixl.ErrClosed and returns once none reads or writes memory any more.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
	return nil
}
