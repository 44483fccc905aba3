// Package servicetest checks a worker service built on libs/worker (the
// prefill and decode binaries): each service module tests its own wiring
// with the same two checks instead of a copy of them.
package servicetest

import (
	"testing"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/libs/worker"
)

// GRPCConformance starts spec with the sim executor and checks that a plain
// grpc-go client (go-grpc-middleware interceptors) can call it: health,
// reflection (listing WorkerService) and InfoService, reporting role.
func GRPCConformance(t *testing.T, spec service.Spec, role string) {
	t.Helper()
	r := meshtest.Start(t, spec, "-listen", "127.0.0.1:0", "-discovery", "none", "-executor", "sim")
	meshtest.CheckGRPC(t, r.Addr, role, "switchyard.worker.v1.WorkerService")
}

// Generate starts spec with its default (built-in tiny random) model and
// checks that it streams the requested 8 tokens with usage.
func Generate(t *testing.T, spec service.Spec) {
	t.Helper()
	r := meshtest.Start(t, spec, "-listen", "127.0.0.1:0", "-discovery", "none")
	c := workerv1connect.NewWorkerServiceClient(client.NewHTTP(), r.URL())
	st, err := c.Generate(t.Context(), connect.NewRequest(&workerv1.GenerateRequest{
		Model: worker.TinyRandomName, TokenIds: []uint32{1, 72, 105}, Stop: &commonv1.StopConditions{MaxTokens: 8, IgnoreEos: true},
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
