package chaos

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// scrape sums each named series' samples in a Prometheus text page, all
// labels together.
func scrape(ctx context.Context, hc *http.Client, addr string, names ...string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, mesh.url(addr)+"/metrics", nil)
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		for _, n := range names {
			rest, ok := strings.CutPrefix(line, n)
			if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{' && rest[0] != ',') {
				continue
			}
			f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
			if len(f) == 0 {
				continue
			}
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				out[n] += v
			}
		}
	}
	return out, sc.Err()
}

// migrationsMetric counts generations a frontend moved to another worker
// after their stream broke (services/frontend/internal/metrics).
const migrationsMetric = "switchyard_frontend_migrations_total"

// remotePrefillsMetric counts the RemotePrefill calls a prefill worker
// served: a label-prefix of its RPC duration histogram's count.
const remotePrefillsMetric = `rpc_server_call_duration_seconds_count{rpc_method="switchyard.worker.v1.WorkerService/RemotePrefill"`

// counter is one process's counter and the phase field its growth goes to.
type counter struct {
	proc   *Proc
	metric string
	field  func(*Phase) *atomic.Int64
}

// CounterWatch adds the growth of processes' counters (frontends'
// migrations, the prefill worker's remote prefills), as it happens, to
// the load's current phase. A counter that went down belongs to a
// restarted process and counts from zero.
type CounterWatch struct {
	load     *Load
	counters []counter
	last     map[int]float64
	hc       *http.Client
	mu       sync.Mutex
}

// WatchCounters polls the stack's counters twice a second until ctx
// ends.
func WatchCounters(ctx context.Context, l *Load, s *Stack) *CounterWatch {
	w := &CounterWatch{load: l, last: map[int]float64{}, hc: mesh.client(2 * time.Second)}
	for _, f := range s.Frontends {
		w.counters = append(w.counters, counter{f, migrationsMetric, func(p *Phase) *atomic.Int64 { return &p.Migrated }})
	}
	w.counters = append(w.counters, counter{s.Prefill, remotePrefillsMetric, func(p *Phase) *atomic.Int64 { return &p.RemotePrefills }})
	w.Poll(ctx)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
				w.Poll(ctx)
			}
		}
	}()
	return w
}

// Poll reads every counter once; call it just before killing a process.
func (w *CounterWatch) Poll(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, c := range w.counters {
		m, err := scrape(ctx, w.hc, c.proc.Addr, c.metric)
		if err != nil {
			continue
		}
		v, last := m[c.metric], w.last[i]
		d := v - last
		if v < last {
			d = v
		}
		if d > 0 {
			c.field(w.load.Phase()).Add(int64(d))
		}
		w.last[i] = v
	}
}
