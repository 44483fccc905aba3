package observe

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/discovery"
)

// Load is one worker's queue and KV use.
type Load struct {
	ID, Model, Role   string
	Running, Waiting  int
	KVUsage           float64 // used blocks over total, 0..1
	PendingPrefillTok int
}

// Busy orders workers for a scale-down: the least busy is drained first
// (its streams are the fewest to finish).
func (l Load) Busy() int { return l.Running + l.Waiting }

// Loads asks every worker for its load (GetLoad) with a deadline of
// timeout each, over client with opts (the service's client options:
// tracing, message size limits); a worker that does not answer is left
// out, and named in errs.
func Loads(ctx context.Context, client *http.Client, workers []discovery.Instance, timeout time.Duration, opts ...connect.ClientOption) ([]Load, []error) {
	out := make([]*Load, len(workers))
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			res, err := workerv1connect.NewWorkerServiceClient(client, w.URL(), opts...).GetLoad(cctx, connect.NewRequest(&workerv1.GetLoadRequest{}))
			if err != nil {
				errs[i] = fmt.Errorf("observe: worker %s: %w", w.ID, err)
				return
			}
			m := res.Msg
			l := &Load{ID: w.ID, Model: w.Model, Role: w.Role, Running: int(m.GetRunningRequests()), Waiting: int(m.GetWaitingRequests()),
				PendingPrefillTok: int(m.GetPendingPrefillTokens())}
			if t := m.GetKvBlocksTotal(); t > 0 {
				l.KVUsage = float64(m.GetKvBlocksUsed()) / float64(t)
			}
			out[i] = l
		})
	}
	wg.Wait()
	var loads []Load
	var failed []error
	for i := range workers {
		if out[i] != nil {
			loads = append(loads, *out[i])
		} else if errs[i] != nil {
			failed = append(failed, errs[i])
		}
	}
	return loads, failed
}
