package fleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"switchyard.dev/libs/mesh/discovery"
)

// The router metrics the console reads (services/router/internal/route
// defines them; OpenTelemetry's Prometheus exporter names them).
const (
	metricDecisions = "switchyard_router_decisions_total"
	metricRequested = "switchyard_router_requested_blocks_total"
	metricMatched   = "switchyard_router_matched_blocks_total"
	metricOverlap   = "switchyard_router_overlap_blocks"
)

// maxRouterScrape bounds one router's /metrics body.
const maxRouterScrape = 8 << 20

// Routing is what the routers decided over the last poll interval,
// summed over every router replica.
type Routing struct {
	// DecisionsPerSecond is routing decisions a second; CanaryShare the
	// share of them that chose a canary decode worker (nil without any).
	DecisionsPerSecond float64  `json:"decisions_per_second"`
	CanaryShare        *float64 `json:"canary_share,omitempty"`
	// HitRatio is the prompt blocks the chosen workers held on device over
	// the blocks requested (nil without requests).
	HitRatio *float64 `json:"hit_ratio,omitempty"`
	// Workers are per decode worker id: decisions a second that chose it
	// and the mean overlap credit (blocks) it was chosen with.
	Workers map[string]WorkerRouting `json:"workers,omitempty"`
}

// WorkerRouting is one worker's share of the routers' decisions.
type WorkerRouting struct {
	DecisionsPerSecond float64 `json:"decisions_per_second"`
	MeanOverlap        float64 `json:"mean_overlap_blocks"`
}

// routerCounts is one read of one router's counters.
type routerCounts struct {
	at                  time.Time
	decisions, canary   float64
	requested, matched  float64
	chosen, overlapSums map[string]float64 // by worker
}

// routing reads every router's /metrics and returns the interval since
// the previous poll (nil on the first, and when no router answered
// twice). A router that restarted contributes from its restart.
func (c *Collector) routing(ctx context.Context, routers []discovery.Instance) (*Routing, []string) {
	cur := make(map[string]routerCounts, len(routers))
	var errs []string
	for _, in := range routers {
		rc, err := c.readRouter(ctx, in)
		if err != nil {
			errs = append(errs, fmt.Sprintf("router %s metrics: %v", in.ID, err))
			continue
		}
		cur[in.URL()] = rc
	}
	prev := c.routers
	c.routers = cur
	var r *Routing
	var canary float64
	requested, matched := 0.0, 0.0
	overlap := map[string]float64{}
	for url, now := range cur {
		was, ok := prev[url]
		if !ok {
			continue
		}
		secs := now.at.Sub(was.at).Seconds()
		if secs <= 0 {
			continue
		}
		if now.decisions < was.decisions { // restarted: everything since
			was = routerCounts{at: was.at}
		}
		if r == nil {
			r = &Routing{Workers: map[string]WorkerRouting{}}
		}
		r.DecisionsPerSecond += (now.decisions - was.decisions) / secs
		canary += (now.canary - was.canary) / secs
		requested += now.requested - was.requested
		matched += now.matched - was.matched
		for w, n := range now.chosen {
			d := n - was.chosen[w]
			if d <= 0 {
				continue
			}
			wr := r.Workers[w]
			wr.DecisionsPerSecond += d / secs
			r.Workers[w] = wr
			overlap[w] += now.overlapSums[w] - was.overlapSums[w]
		}
	}
	if r == nil {
		return nil, errs
	}
	for w, wr := range r.Workers {
		if n := wr.DecisionsPerSecond; n > 0 {
			// overlap[w] summed over routers of different intervals; the
			// intervals are one poll apart, so per decision is close.
			wr.MeanOverlap = overlap[w] / decisionsOf(cur, prev, w)
			r.Workers[w] = wr
		}
	}
	if r.DecisionsPerSecond > 0 {
		share := canary / r.DecisionsPerSecond
		r.CanaryShare = &share
	}
	if requested > 0 {
		hit := matched / requested
		r.HitRatio = &hit
	}
	return r, errs
}

// decisionsOf is how many decisions chose worker w between the two reads.
func decisionsOf(cur, prev map[string]routerCounts, w string) float64 {
	n := 0.0
	for url, now := range cur {
		if was, ok := prev[url]; ok {
			n += max(now.chosen[w]-was.chosen[w], 0)
		}
	}
	return max(n, 1)
}

func (c *Collector) readRouter(ctx context.Context, in discovery.Instance) (routerCounts, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.URL()+"/metrics", nil)
	if err != nil {
		return routerCounts{}, err
	}
	at := c.cfg.Now()
	res, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return routerCounts{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return routerCounts{}, fmt.Errorf("/metrics answered %s", res.Status)
	}
	return parseRouter(io.LimitReader(res.Body, maxRouterScrape), at)
}

// parseRouter reads the decision counters of one router's metrics.
func parseRouter(r io.Reader, at time.Time) (routerCounts, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return routerCounts{}, fmt.Errorf("metrics: %w", err)
	}
	// A router that has decided nothing yet exports none of these: zero.
	rc := routerCounts{at: at, chosen: map[string]float64{}, overlapSums: map[string]float64{}}
	for _, m := range fams[metricDecisions].GetMetric() {
		v := m.GetCounter().GetValue()
		rc.decisions += v
		if labelOf(m.GetLabel(), "group") == "canary" {
			rc.canary += v
		}
	}
	for _, m := range fams[metricRequested].GetMetric() {
		rc.requested += m.GetCounter().GetValue()
	}
	for _, m := range fams[metricMatched].GetMetric() {
		rc.matched += m.GetCounter().GetValue()
	}
	for _, m := range fams[metricOverlap].GetMetric() {
		w := labelOf(m.GetLabel(), "worker")
		rc.chosen[w] += float64(m.GetHistogram().GetSampleCount())
		rc.overlapSums[w] += m.GetHistogram().GetSampleSum()
	}
	return rc, nil
}

func labelOf(ls []*dto.LabelPair, name string) string {
	for _, l := range ls {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
