package app

import (
	"testing"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/meshtest"
)

// A plain grpc-go client (go-grpc-middleware interceptors) can call the
// service: health, reflection (listing WorkerService) and InfoService.
func TestGRPCConformance(t *testing.T) {
	t.Parallel()
	r := meshtest.Start(t, Spec("v0.0.0-test"), "-listen", "127.0.0.1:0", "-discovery", "none", "-executor", "sim")
	meshtest.CheckGRPC(t, r.Addr, "decode", "switchyard.worker.v1.WorkerService")
}

// The service generates with its default (built-in tiny random) model.
func TestGenerate(t *testing.T) {
	t.Parallel()
	r := meshtest.Start(t, Spec("v0.0.0-test"), "-listen", "127.0.0.1:0", "-discovery", "none")
	c := workerv1connect.NewWorkerServiceClient(client.NewHTTP(), r.URL())
	st, err := c.Generate(t.Context(), connect.NewRequest(&workerv1.GenerateRequest{
		Model: "tiny-random", TokenIds: []uint32{1, 72, 105}, Stop: &commonv1.StopConditions{MaxTokens: 8, IgnoreEos: true},
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := 0
	var last *workerv1.GenerateResponse
	for st.Receive() {
		last = st.Msg()
		n += len(last.GetTokenIds())
	}
	if st.Err() != nil || n != 8 || last.GetUsage().GetCompletionTokens() != 8 {
		t.Fatalf("%d tokens, last %v, err %v; want 8 with usage", n, last, st.Err())
	}
}
