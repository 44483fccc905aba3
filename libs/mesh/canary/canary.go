// Package canary decides which requests a canary serves.
//
// A rollout names, for one role, the version under test and the share of
// that role's traffic it takes. Callers that choose among instances of a
// role (frontends choosing routers, routers choosing workers) split every
// request first into the canary group or the baseline group, and rank by
// cost only within the group: the share holds whatever the replica counts,
// and routing quality is unchanged inside each group.
//
// The split is sticky. A request's key (its session, or its prompt's
// leading tokens) hashes, salted by role, to a point in [0, 1); the request
// goes to the canaries when the point falls below the weight. The same
// session or prefix therefore lands in the same group every time, so its
// KV cache stays where it was built, and raising the weight only moves keys
// from the baseline to the canary, never back.
//
// An instance is a canary when it carries discovery.TagCanary, or when the
// rollout of its role names its version. The planner that leads publishes
// the rollouts in its discovery record (discovery.MetaRollouts); a caller
// keeps the last rollouts it saw while no planner publishes any, so a
// planner restart never turns a canary's traffic into a full share.
package canary

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"switchyard.dev/libs/mesh/discovery"
)

// Rollout is one role's canary: the version under test and its share.
type Rollout struct {
	// Version is the canary's build version (discovery.Instance.Version).
	Version string
	// Weight is the share of the role's requests the canary takes, in
	// [0, 1].
	Weight float64
}

// Rollouts are the active rollouts by role.
type Rollouts map[string]Rollout

// MaxRollouts bounds how many roles a rollouts value names.
const MaxRollouts = 16

// Parse reads rollouts as String writes them:
// "decode=0.4.0@0.1,router=0.4.0@0.25"; the empty string is none.
func Parse(s string) (Rollouts, error) {
	out := Rollouts{}
	if s == "" {
		return out, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		role, rest, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("canary: rollout %q: want role=version@weight", part)
		}
		version, w, ok := strings.Cut(rest, "@")
		if !ok {
			return nil, fmt.Errorf("canary: rollout %q: want role=version@weight", part)
		}
		weight, err := strconv.ParseFloat(w, 64)
		if err != nil {
			return nil, fmt.Errorf("canary: rollout %q: weight: %w", part, err)
		}
		r := Rollout{Version: version, Weight: weight}
		if err := r.Validate(role); err != nil {
			return nil, err
		}
		if _, dup := out[role]; dup {
			return nil, fmt.Errorf("canary: role %q named twice", role)
		}
		if len(out) == MaxRollouts {
			return nil, fmt.Errorf("canary: more than %d rollouts", MaxRollouts)
		}
		out[role] = r
	}
	return out, nil
}

// Validate checks a rollout of role.
func (r Rollout) Validate(role string) error {
	if !discovery.ValidID(role) {
		return fmt.Errorf("canary: role %q: want 1-128 of [A-Za-z0-9_.-]", role)
	}
	if !ValidVersion(r.Version) {
		return fmt.Errorf("canary: %s: version %q: want 1-64 of [A-Za-z0-9_.+-]", role, r.Version)
	}
	if math.IsNaN(r.Weight) || r.Weight < 0 || r.Weight > 1 {
		return fmt.Errorf("canary: %s: weight %v: want a number in [0, 1]", role, r.Weight)
	}
	return nil
}

// ValidVersion reports whether v can name a build version in a rollout.
func ValidVersion(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for _, c := range v {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._+-", c)
		if !ok {
			return false
		}
	}
	return true
}

// String writes rollouts sorted by role, the form Parse reads.
func (rs Rollouts) String() string {
	var b strings.Builder
	for _, role := range slices.Sorted(maps.Keys(rs)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		r := rs[role]
		b.WriteString(role + "=" + r.Version + "@" + strconv.FormatFloat(r.Weight, 'g', -1, 64))
	}
	return b.String()
}

// Split holds the rollouts in force and answers, per request, which group
// serves it. It is safe for concurrent use; the zero value is not usable.
type Split struct {
	tagWeight float64
	cur       atomic.Pointer[Rollouts]
}

// NewSplit returns a split with no rollouts, in which instances tagged
// canary take tagWeight of their role's traffic.
func NewSplit(tagWeight float64) (*Split, error) {
	if math.IsNaN(tagWeight) || tagWeight < 0 || tagWeight > 1 {
		return nil, fmt.Errorf("canary: weight %v: want a number in [0, 1]", tagWeight)
	}
	s := &Split{tagWeight: tagWeight}
	s.cur.Store(&Rollouts{})
	return s, nil
}

// Set replaces the rollouts in force.
func (s *Split) Set(rs Rollouts) {
	c := maps.Clone(rs)
	if c == nil {
		c = Rollouts{}
	}
	s.cur.Store(&c)
}

// Rollouts returns a copy of the rollouts in force.
func (s *Split) Rollouts() Rollouts { return maps.Clone(*s.cur.Load()) }

// IsCanary reports whether in belongs to its role's canary group.
func (s *Split) IsCanary(in discovery.Instance) bool {
	return s.Member(in.Role, in.Version, in.HasTag(discovery.TagCanary))
}

// Member is IsCanary for an instance of role and version, tagged canary
// or not, for callers that keep those fields and no Instance.
func (s *Split) Member(role, version string, tagged bool) bool {
	if tagged {
		return true
	}
	r, ok := (*s.cur.Load())[role]
	return ok && r.Version == version
}

// Weight is the share of role's requests its canaries take.
func (s *Split) Weight(role string) float64 {
	if r, ok := (*s.cur.Load())[role]; ok {
		return r.Weight
	}
	return s.tagWeight
}

// Canary reports whether the request with key goes to role's canaries
// (when the role has both canaries and baseline instances).
func (s *Split) Canary(role string, key uint64) bool { return Point(role, key) < s.Weight(role) }

// Point is where key falls in [0, 1) for role: uniform over keys, and
// independent between roles, so the requests the router canary takes are
// not the same ones the worker canary takes.
func Point(role string, key uint64) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(role))
	return float64(mix(key^h.Sum64())>>11) / (1 << 53)
}

// mix is splitmix64's finalizer: every input bit moves every output bit.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// StickyTokens is how many leading prompt tokens key a request without a
// session: enough to tell conversations apart after a short shared system
// prompt, few enough that a conversation's later turns, which extend its
// first prompt, key the same.
const StickyTokens = 64

// SessionKey keys the requests of one session (never 0).
func SessionKey(session string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(session))
	return nonZero(h.Sum64())
}

// TokensKey keys a request by its first StickyTokens prompt tokens
// (never 0).
func TokensKey(tokens []uint32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, t := range tokens[:min(len(tokens), StickyTokens)] {
		b[0], b[1], b[2], b[3] = byte(t), byte(t>>8), byte(t>>16), byte(t>>24)
		_, _ = h.Write(b[:])
	}
	return nonZero(h.Sum64())
}

// nonZero keeps 0 free to mean "no key" on the wire.
func nonZero(k uint64) uint64 {
	if k == 0 {
		return 1
	}
	return k
}

// Follow keeps s set to the rollouts the planners publish, until ctx ends.
// The first planner (by id) that publishes discovery.MetaRollouts wins; a
// malformed value is logged and ignored; while none publishes, the last
// rollouts stay in force.
func Follow(ctx context.Context, reg discovery.Registry, log *slog.Logger, s *Split) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	last := ""
	err := discovery.WatchRole(ctx, reg, log, discovery.RolePlanner, func(ins []discovery.Instance) {
		for _, in := range ins {
			v, ok := in.Meta[discovery.MetaRollouts]
			if !ok {
				continue
			}
			if v == last {
				return
			}
			rs, err := Parse(v)
			if err != nil {
				log.Warn("ignoring a planner's rollouts", "planner", in.ID, "err", err)
				return
			}
			last = v
			s.Set(rs)
			log.Info("rollouts changed", "rollouts", v, "planner", in.ID)
			return
		}
	})
	if err != nil {
		return fmt.Errorf("canary: follow planners: %w", err)
	}
	return nil
}

// Choose splits n instances into the group that serves a request: it
// returns the indexes of the canaries when the request goes to them and
// there are any, else of the rest (or of the canaries when there is no
// rest). isCanary reports on instance i. The result reuses buf.
func (s *Split) Choose(role string, key uint64, n int, isCanary func(i int) bool, buf []int) []int {
	canaries, base := 0, 0
	for i := range n {
		if isCanary(i) {
			canaries++
		} else {
			base++
		}
	}
	want := canaries > 0 && (base == 0 || s.Canary(role, key))
	buf = buf[:0]
	for i := range n {
		if isCanary(i) == want {
			buf = append(buf, i)
		}
	}
	return buf
}
