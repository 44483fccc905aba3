package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// nomadArgs matches a task's args list in a job file (one line, JSON
// compatible: strings only).
var nomadArgs = regexp.MustCompile(`(?m)^\s*args\s*=\s*(\[.*\])\s*$`)

// Every flag a Nomad job passes exists in the service it starts: the
// binary parses the job's args (with -version, so it exits before doing
// anything else). A flag renamed in code but not in deploy/nomad would
// otherwise fail only at deploy time.
func TestNomadJobArgsParse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every service; skipped under -short")
	}
	bin := Build(t)
	for _, svc := range Services {
		t.Run(svc, func(t *testing.T) {
			job, err := os.ReadFile("../../deploy/nomad/" + svc + ".nomad.hcl")
			if err != nil {
				t.Fatal(err)
			}
			m := nomadArgs.FindAllSubmatch(job, -1)
			if len(m) != 1 {
				t.Fatalf("want one args line in the job file, found %d", len(m))
			}
			var args []string
			if err := json.Unmarshal(m[0][1], &args); err != nil {
				t.Fatalf("args %s: %v", m[0][1], err)
			}
			out, err := exec.Command(bin+"/"+svc, append(args, "-version")...).CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), svc+" ") {
				t.Fatalf("%s %s -version: %v\n%s", svc, strings.Join(args, " "), err, out)
			}
		})
	}
}
