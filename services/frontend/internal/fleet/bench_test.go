package fleet_test

import (
	"syscall"
	"testing"
	"time"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/services/frontend/internal/fleet"
	"switchyard.dev/services/frontend/internal/fleet/fleettest"
)

// BenchmarkPoll500 is one console update with 500 workers registered:
// 500 GetLoad calls (in process, so it measures the console's own work,
// encoding and decoding included) and one snapshot encoded. It reports
// the snapshot's size as bytes/update (what each SSE viewer is sent) and
// the process's CPU time per update (user+system, the fake workers'
// side included, so an upper bound on the console's own); ns/op is the
// update's wall time, which the poll interval must exceed.
func BenchmarkPoll500(b *testing.B) {
	m := fleettest.New()
	for i := range 500 {
		m.AddWorker(i, fleettest.NewWorker(&workerv1.GetLoadResponse{
			RunningRequests: uint32(i % 8), WaitingRequests: uint32(i % 3), KvBlocksUsed: uint32(i * 7), KvBlocksTotal: 4096,
		}))
	}
	m.AddPlanner(500, 520)
	c := fleet.New(fleet.Config{Registry: m, HTTPClient: m.HTTPClient()})
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		c.Poll(b.Context())
	}
	b.ReportMetric(float64((cpuTime(b)-start).Microseconds())/1000/float64(b.N), "cpu-ms/update")
	f := c.Latest()
	if s := decodeFrame(b, f); len(s.Instances) != 501 {
		b.Fatalf("instances = %d, want 501", len(s.Instances))
	}
	b.ReportMetric(float64(len(f.JSON)), "bytes/update")
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
