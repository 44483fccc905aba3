package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/radix"
	"switchyard.dev/libs/vllmevents"
	"switchyard.dev/libs/worker/engines/rehash"
	"switchyard.dev/libs/worker/handler"
)

// rehashWorker serves SubscribeKvEvents from a Rehasher, as a worker
// fronting vLLM or SGLang does (dump, then the journal).
type rehashWorker struct {
	workerv1connect.UnimplementedWorkerServiceHandler
	r *rehash.Rehasher
}

func (w *rehashWorker) SubscribeKvEvents(ctx context.Context, req *connect.Request[workerv1.SubscribeKvEventsRequest], out *connect.ServerStream[workerv1.SubscribeKvEventsResponse]) error {
	tokens := !req.Msg.GetOmitTokenIds()
	after := req.Msg.GetAfterSequence()
	if req.Msg.GetDump() {
		d := w.r.Dump()
		if err := out.Send(&workerv1.SubscribeKvEventsResponse{Sequence: d.Seq, Dump: true, DumpComplete: true, Events: handler.Events(d.Events, tokens)}); err != nil {
			return err
		}
		after = d.Seq
	}
	sub := w.r.Subscribe(after)
	for {
		b, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		if err := out.Send(&workerv1.SubscribeKvEventsResponse{Sequence: b.Seq, Events: handler.Events(b.Events, tokens)}); err != nil {
			return err
		}
	}
}

// recordings are vLLM's and SGLang's KV events of one history, as
// libs/vllmevents records them (see its TestRecordings).
const recordings = "../../../../libs/vllmevents/testdata/recordings"

func feedRecording(t *testing.T, r *rehash.Rehasher, engine string, from, to int) {
	t.Helper()
	for seq := from; seq < to; seq++ {
		data, err := os.ReadFile(filepath.Join(recordings, engine, fmt.Sprintf("%04d.msgpack", seq)))
		if err != nil {
			t.Fatal(err)
		}
		b, err := vllmevents.DecodeBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.HandleBatch(uint64(seq), b); err != nil {
			t.Fatal(err)
		}
	}
}

// A vLLM or SGLang worker earns prefix credit: its engine's events,
// re-hashed by the worker and followed by the router like any worker's
// (dump, then live), put into the index exactly the chains the router
// looks a request's tokens up with.
func TestEngineWorkerEarnsPrefixCredit(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(recordings, "requests.json"))
	if err != nil {
		t.Fatal(err)
	}
	var reqs struct {
		BlockSize int                 `json:"block_size"`
		Requests  map[string][]uint32 `json:"requests"`
	}
	if err := json.Unmarshal(data, &reqs); err != nil {
		t.Fatal(err)
	}
	depth := func(ix *radix.Index, req string) func() int {
		return func() int {
			hashes := kvhash.AppendBlockHashes(nil, kvhash.Root, reqs.Requests[req], reqs.BlockSize, 0) // as route.Decide
			for _, m := range ix.Match(hashes).Workers {
				if m.Worker == "v" {
					return m.Depth[kvtier.Device]
				}
			}
			return 0
		}
	}
	for _, engine := range []string{"vllm-array", "vllm-map", "sglang"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			r, err := rehash.New(rehash.Config{BlockSize: reqs.BlockSize})
			if err != nil {
				t.Fatal(err)
			}
			feedRecording(t, r, engine, 0, 3) // A and B cached before the router subscribes
			mux := http.NewServeMux()
			mux.Handle(workerv1connect.NewWorkerServiceHandler(&rehashWorker{r: r}))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			ix := radix.New()
			in := newIngester(t, ix)
			ctx, cancel := context.WithCancel(t.Context())
			defer func() { cancel(); in.Wait() }()
			in.Sync(ctx, []Worker{{ID: "v", URL: srv.URL}})
			eventually(t, "A's three blocks credited from the dump", depth(ix, "A"), 3)
			eventually(t, "B's three blocks credited (its first is A's)", depth(ix, "B"), 3)
			feedRecording(t, r, engine, 3, 6) // evictions, then a cache reset and F
			eventually(t, "F credited live", depth(ix, "F"), 2)
			eventually(t, "A's blocks gone with the reset", depth(ix, "A"), 0)
		})
	}
}

func eventually(t *testing.T, what string, got func() int, want int) {
	t.Helper()
	deptest.Eventually(t, 10*time.Second, what, func() bool { return got() == want })
}
