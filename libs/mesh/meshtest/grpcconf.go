// Package meshtest holds test helpers for Switchyard services: a grpc-go
// conformance check proving that plain gRPC clients can call a service, and
// in-process start-up of services.
package meshtest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/timeout"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	meshv1 "switchyard.dev/gen/switchyard/mesh/v1"
)

// DialGRPC connects a plain grpc-go client, with go-grpc-middleware's
// timeout, retry and logging interceptors, as an operator's tool would.
func DialGRPC(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	log := logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		slog.New(slog.DiscardHandler).Log(ctx, slog.Level(lvl), msg, fields...)
	})
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(
			timeout.UnaryClientInterceptor(10*time.Second),
			retry.UnaryClientInterceptor(retry.WithMax(5), retry.WithCodes(codes.Unavailable), retry.WithBackoff(retry.BackoffLinear(100*time.Millisecond))),
			logging.UnaryClientInterceptor(log),
		),
		grpc.WithChainStreamInterceptor(
			logging.StreamClientInterceptor(log),
		),
	)
	if err != nil {
		t.Fatalf("grpc dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// CheckGRPC asserts that a grpc-go client sees the service at addr serving
// gRPC health, listing wantServices through reflection, and answering
// InfoService.GetInfo with wantRole.
func CheckGRPC(t testing.TB, addr, wantRole string, wantServices ...string) {
	t.Helper()
	conn := DialGRPC(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	hres, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hres.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("grpc health of %s = %v, %v; want SERVING", addr, hres.GetStatus(), err)
	}

	info := new(meshv1.GetInfoResponse)
	if err := conn.Invoke(ctx, "/switchyard.mesh.v1.InfoService/GetInfo", &meshv1.GetInfoRequest{}, info); err != nil {
		t.Fatalf("grpc GetInfo on %s: %v", addr, err)
	}
	if info.GetRole() != wantRole || info.GetVersion() == "" || info.GetInstanceId() == "" {
		t.Fatalf("GetInfo = %v; want role %q with version and id", info, wantRole)
	}

	listed, err := listServices(ctx, conn)
	if err != nil {
		t.Fatalf("grpc reflection on %s: %v", addr, err)
	}
	for _, s := range append([]string{"switchyard.mesh.v1.InfoService", "grpc.health.v1.Health"}, wantServices...) {
		if !slices.Contains(listed, s) {
			t.Fatalf("reflection on %s lists %v; missing %s", addr, listed, s)
		}
	}
}

func listServices(ctx context.Context, conn *grpc.ClientConn) ([]string, error) {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.CloseSend() }()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
	}); err != nil {
		return nil, err
	}
	res, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	lr := res.GetListServicesResponse()
	if lr == nil {
		return nil, fmt.Errorf("reflection answered %T", res.GetMessageResponse())
	}
	var out []string
	for _, s := range lr.GetService() {
		out = append(out, s.GetName())
	}
	return out, nil
}
