package consuldisc

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/consul/api"

	"switchyard.dev/libs/mesh/discovery"
)

func ids(ins []discovery.Instance) []string {
	out := make([]string, 0, len(ins))
	for _, in := range ins {
		out = append(out, in.ID)
	}
	return out
}

// quiet fails if the watch sent anything once every goroutine of the
// synctest bubble is blocked.
func quiet(t *testing.T, ch <-chan []discovery.Instance, what string) {
	t.Helper()
	synctest.Wait()
	select {
	case got := <-ch:
		t.Fatalf("%s: watch sent %v; want nothing", what, ids(got))
	default:
	}
}

// The lapse window's rule, step by step: each step is one catalog
// answer, what the watch listed before it, and what it must list now.
func TestLapsesFilter(t *testing.T) {
	t.Parallel()
	const window = 3 * time.Second
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	passing := func(id string) entry { return entry{in: instance(id), passing: true} }
	lapsed := func(id string) entry { return entry{in: instance(id), lapsed: true} }
	failing := func(id string) entry { return entry{in: instance(id)} } // set critical, or any other failure
	type step struct {
		at      time.Duration // after t0
		entries []entry
		want    []string
		reset   bool // the agent's index went back before this answer
	}
	for _, tt := range []struct {
		name   string
		window time.Duration
		steps  []step
	}{
		{"every heartbeat lapses and passes again: nothing dropped", window, []step{
			{0, []entry{passing("a"), passing("b")}, []string{"a", "b"}, false},
			{10 * time.Second, []entry{lapsed("a"), lapsed("b")}, []string{"a", "b"}, false},
			{10*time.Second + 20*time.Millisecond, []entry{passing("a"), lapsed("b")}, []string{"a", "b"}, false},
			{10*time.Second + 40*time.Millisecond, []entry{passing("a"), passing("b")}, []string{"a", "b"}, false},
		}},
		{"a lapse that lasts the window is believed, at its end", window, []step{
			{0, []entry{passing("a"), passing("b")}, []string{"a", "b"}, false},
			{time.Second, []entry{passing("a"), lapsed("b")}, []string{"a", "b"}, false},
			{time.Second + window - time.Millisecond, []entry{passing("a"), lapsed("b")}, []string{"a", "b"}, false},
			{time.Second + window, []entry{passing("a"), lapsed("b")}, []string{"a"}, false},
			// Still lapsed later: not held a second time.
			{time.Minute, []entry{passing("a"), lapsed("b")}, []string{"a"}, false},
		}},
		{"deregistered: gone at once", window, []step{
			{0, []entry{passing("a"), passing("b")}, []string{"a", "b"}, false},
			{time.Second, []entry{passing("b")}, []string{"b"}, false},
		}},
		{"set critical by itself (draining): gone at once", window, []step{
			{0, []entry{passing("a"), passing("b")}, []string{"a", "b"}, false},
			{time.Second, []entry{failing("a"), passing("b")}, []string{"b"}, false},
		}},
		{"held, then deregistered: gone at once", window, []step{
			{0, []entry{passing("a")}, []string{"a"}, false},
			{time.Second, []entry{lapsed("a")}, []string{"a"}, false},
			{2 * time.Second, nil, []string{}, false},
		}},
		{"held, then set critical: gone at once", window, []step{
			{0, []entry{passing("a")}, []string{"a"}, false},
			{time.Second, []entry{lapsed("a")}, []string{"a"}, false},
			{2 * time.Second, []entry{failing("a")}, []string{}, false},
		}},
		{"never listed: not held", window, []step{
			{0, []entry{lapsed("a"), passing("b")}, []string{"b"}, false},
		}},
		{"passing again restarts the rule", window, []step{
			{0, []entry{passing("a")}, []string{"a"}, false},
			{time.Second, []entry{lapsed("a")}, []string{"a"}, false},
			{2 * time.Second, []entry{passing("a")}, []string{"a"}, false},
			{20 * time.Second, []entry{lapsed("a")}, []string{"a"}, false},
			{20*time.Second + window, []entry{lapsed("a")}, []string{}, false},
		}},
		{"an answer after a reset lacks them: held", window, []step{
			{0, []entry{passing("a"), passing("b"), passing("c")}, []string{"a", "b", "c"}, false},
			{time.Second, nil, []string{"a", "b", "c"}, true},
			{time.Second + 10*time.Millisecond, []entry{passing("a"), lapsed("b")}, []string{"a", "b", "c"}, false},
			{time.Second + window, []entry{passing("a"), lapsed("b")}, []string{"a"}, false},
		}},
		{"held lapsed, then lacking after a reset: held still, to the same time", window, []step{
			{0, []entry{passing("a")}, []string{"a"}, false},
			{time.Second, []entry{lapsed("a")}, []string{"a"}, false},
			{2 * time.Second, nil, []string{"a"}, true},
			{time.Second + window, nil, []string{}, false},
		}},
		{"a reset with everything present changes nothing", window, []step{
			{0, []entry{passing("a")}, []string{"a"}, false},
			{time.Second, []entry{passing("a"), passing("b")}, []string{"a", "b"}, true},
			{2 * time.Second, []entry{passing("b")}, []string{"b"}, false},
		}},
		{"no window: a lapse or a reset is believed at once", -1, []step{
			{0, []entry{passing("a"), passing("b")}, []string{"a", "b"}, false},
			{time.Second, []entry{lapsed("a")}, []string{}, false},
			{2 * time.Second, []entry{passing("a"), passing("b")}, []string{"a", "b"}, false},
			{3 * time.Second, nil, []string{}, true},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLapses(tt.window)
			var last []discovery.Instance
			for i, s := range tt.steps {
				got := l.filter(t0.Add(s.at), s.entries, last, s.reset)
				if !slices.Equal(ids(got), s.want) {
					t.Fatalf("step %d (%v): listed %v; want %v", i, s.at, ids(got), s.want)
				}
				last = got
			}
		})
	}
}

// A watch over an agent that resumes from a pause: every heartbeat check
// lapses at once and passes again a moment later. The watch sends nothing
// meanwhile; an instance that stays lapsed is dropped when the window
// ends (the watch looks again then, with nothing else changing); a
// deregistration and a self-set critical are sent at once. An instance
// the agent forgot in a restart and that does not come back goes when
// the window ends.
func TestWatchHolds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := newFakeAgent()
		r, _ := newTestRegistry(t, a)
		for _, id := range []string{"a", "b", "c", "d"} {
			a.put(&api.AgentServiceRegistration{ID: "sy-" + id, Name: "sy-decode", Address: "127.0.0.1", Port: 9200,
				Meta:  map[string]string{metaRole: discovery.RoleDecode, metaVersion: "1.0.0"},
				Check: &api.AgentServiceCheck{CheckID: checkIDPrefix + id + ":x", Status: api.HealthPassing}})
		}
		ch, err := r.Watch(t.Context(), discovery.RoleDecode)
		if err != nil {
			t.Fatal(err)
		}
		expect := func(what string, want ...string) {
			t.Helper()
			synctest.Wait()
			select {
			case got := <-ch:
				if !slices.Equal(ids(got), want) {
					t.Fatalf("%s: watch sent %v; want %v", what, ids(got), want)
				}
			default:
				t.Fatalf("%s: watch sent nothing; want %v", what, want)
			}
		}
		expect("first answer", "a", "b", "c", "d")

		for _, id := range []string{"a", "b", "c", "d"} {
			a.lapse(a.checkOf("sy-" + id))
		}
		quiet(t, ch, "every check lapsed")
		time.Sleep(20 * time.Millisecond)
		for _, id := range []string{"a", "b", "c"} { // d is dead: no heartbeat
			if err := a.UpdateTTL(t.Context(), a.checkOf("sy-"+id), api.HealthPassing); err != nil {
				t.Fatal(err)
			}
		}
		quiet(t, ch, "three passing again, d lapsed")
		start := time.Now()
		synctest.Wait()
		time.Sleep(testWindow - 20*time.Millisecond - time.Nanosecond)
		quiet(t, ch, "just before d's window ends")
		time.Sleep(time.Nanosecond)
		expect("d's window ended", "a", "b", "c")
		if d := time.Since(start); d != testWindow-20*time.Millisecond {
			t.Errorf("d dropped %v after the heartbeats came back; want the rest of its window", d)
		}

		if err := a.UpdateTTL(t.Context(), a.checkOf("sy-a"), api.HealthCritical); err != nil {
			t.Fatal(err)
		}
		expect("a set critical by itself", "b", "c")
		if err := a.Deregister(t.Context(), "sy-b"); err != nil {
			t.Fatal(err)
		}
		expect("b deregistered", "c")

		// The agent restarts and forgets c, whose process is gone too: it
		// is kept for the window, then dropped.
		a.restart()
		quiet(t, ch, "after the restart")
		time.Sleep(testWindow - time.Nanosecond)
		quiet(t, ch, "just before the window ends")
		time.Sleep(time.Nanosecond)
		expect("c not back in the window")
	})
}
