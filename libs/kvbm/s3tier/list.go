package s3tier

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Refresh lists the namespace now (it also runs every Config.Refresh).
func (t *Tier) Refresh(ctx context.Context) error { return t.list(ctx) }

// list learns the blocks the namespace holds. A block is named by its key;
// its parent is learnt only when it is read, so blocks found by listing
// are announced without one.
func (t *Tier) list(ctx context.Context) error {
	_, cancel, err := t.call(ctx) // closed, or backing off
	if err != nil {
		return err
	}
	cancel()
	p := s3.NewListObjectsV2Paginator(t.client, &s3.ListObjectsV2Input{Bucket: aws.String(t.cfg.Bucket), Prefix: aws.String(t.prefix)})
	for p.HasMorePages() {
		// Each page has its own deadline: a large namespace takes many.
		cctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
		page, err := p.NextPage(cctx)
		cancel()
		if err != nil {
			t.brk.fail()
			return err
		}
		for _, o := range page.Contents {
			h, err := strconv.ParseUint(strings.TrimPrefix(aws.ToString(o.Key), t.prefix), 16, 64)
			if err != nil {
				continue // not a block of ours
			}
			t.idx.learn(h, int(aws.ToInt64(o.Size)))
		}
	}
	t.brk.ok()
	return nil
}

func (t *Tier) refresher(ctx context.Context) {
	defer close(t.done)
	if t.cfg.Refresh < 0 {
		return
	}
	tick := time.NewTicker(t.cfg.Refresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_ = t.list(ctx) // a store that is down is retried at the next tick
		}
	}
}
