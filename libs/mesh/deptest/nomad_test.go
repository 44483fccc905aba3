package deptest

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNomadStopsItsTasks runs a raw_exec task on a real dev agent and
// checks that stopping the agent stops the task too, whether it exits when
// asked or has to be killed: the process a test leaves behind would
// outlive the test run.
func TestNomadStopsItsTasks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		stop func(*Nomad)
	}{
		{"asked", (*Nomad).Stop},
		{"killed", func(n *Nomad) { n.Process.Stop(); sweep(n.Dir) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testNomadStops(t, tc.stop)
		})
	}
}

func testNomadStops(t *testing.T, stop func(*Nomad)) {
	c := StartConsul(t)
	n := StartNomad(t, c.Addr)
	pidFile := filepath.Join(t.TempDir(), "pid")
	job := map[string]any{"Job": map[string]any{
		"ID": "deptest", "Type": "service", "Datacenters": []string{"*"},
		"TaskGroups": []any{map[string]any{
			"Name": "g", "Count": 1,
			"Tasks": []any{map[string]any{
				"Name": "sleep", "Driver": "raw_exec", "KillTimeout": int64(5 * time.Second),
				"Config": map[string]any{"command": "/bin/sh", "args": []string{"-c",
					`echo $$ > ` + pidFile + `; trap "exit 0" TERM; while :; do sleep 0.2; done`}},
			}},
		}},
	}}
	if err := n.Do(t.Context(), http.MethodPost, "/v1/jobs", job, nil); err != nil {
		t.Fatal(err)
	}
	var pid int
	Eventually(t, time.Minute, "the task to write its pid", func() bool {
		b, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	stop(n)
	if !n.Exited() {
		t.Fatal("nomad still running after Stop")
	}
	Eventually(t, 10*time.Second, "the task to be gone with its agent", func() bool {
		return !alive(pid)
	})
}

// alive reports whether pid is a process that is not a zombie (an
// orphan's zombie waits for whoever PID 1 is to reap it).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}
