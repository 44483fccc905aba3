package supervise

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// targetGroup is one entry of a Prometheus file_sd target list.
type targetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// targetsLocked lists every instance with a port as a loopback scrape
// target, one group per pool labelled service=<the pool's service>, in
// pool and index order. Caller holds sv.mu.
func (sv *Supervisor) targetsLocked() []targetGroup {
	out := []targetGroup{}
	for _, p := range sv.pools {
		g := targetGroup{Targets: []string{}, Labels: map[string]string{"service": p.spec.Service, "pool": p.spec.Name}}
		for _, i := range slices.Sorted(maps.Keys(p.insts)) {
			if port := p.insts[i].names.Port; port != 0 {
				g.Targets = append(g.Targets, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			}
		}
		if len(g.Targets) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// writeTargetsLocked rewrites the spec's Prometheus target file, if it
// names one. Prometheus may read the file at any moment, so it is
// replaced whole (written beside it, then renamed). A failure is logged:
// the stack serves without it. Caller holds sv.mu.
func (sv *Supervisor) writeTargetsLocked() {
	path := sv.spec.PrometheusTargets
	if path == "" {
		return
	}
	if err := writeFileAtomic(path, sv.targetsLocked()); err != nil {
		sv.log.Warn("prometheus targets not written", "path", path, "err", err)
	}
}

func writeFileAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write: %w", err)
	}
	return nil
}
