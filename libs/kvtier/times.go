package kvtier

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Times holds one duration per tier, such as the measured time to load a
// block from each; zero means not measured.
type Times [Count]time.Duration

// String formats the measured tiers as "host=84000,disk=350000":
// nanoseconds, fastest tier first, unmeasured tiers left out. Workers
// publish their tiers' load times in discovery in this form.
func (ts Times) String() string {
	var b strings.Builder
	for t, d := range ts {
		if d <= 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(Tier(t).String())
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(d.Nanoseconds(), 10))
	}
	return b.String()
}

// ParseTimes reads what String writes. Each tier appears at most once,
// with a positive number of nanoseconds; the empty string is no tier.
func ParseTimes(s string) (Times, error) {
	var ts Times
	if s == "" {
		return ts, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(part, "=")
		t, known := byName(name)
		if !ok || !known {
			return Times{}, fmt.Errorf("kvtier: %q: want tier=nanoseconds with a tier of device, host, disk or external", part)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || strconv.FormatInt(n, 10) != v {
			return Times{}, fmt.Errorf("kvtier: %q: want a positive whole number of nanoseconds", part)
		}
		if ts[t] != 0 {
			return Times{}, fmt.Errorf("kvtier: %q: tier %s given twice", s, t)
		}
		ts[t] = time.Duration(n)
	}
	return ts, nil
}

func byName(s string) (Tier, bool) {
	for t := range Tier(Count) {
		if t.String() == s {
			return t, true
		}
	}
	return 0, false
}
