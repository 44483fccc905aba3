package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"switchyard.dev/libs/mesh/deptest"
)

// renderedJob is the part of a rendered job (`nomad job run -output`)
// these tests read.
type renderedJob struct {
	Job struct {
		ID         string
		TaskGroups []struct {
			Name     string
			Count    int
			Networks []struct {
				DynamicPorts []struct{ Label string }
			}
			Services []struct {
				Checks []struct{ Name, PortLabel string }
			}
			Tasks []struct {
				Driver string
				Config struct {
					Command string
					Args    []string
				}
				Artifacts []struct {
					GetterSource  string
					GetterOptions map[string]string
				}
				Templates []struct{ DestPath string }
				Resources struct {
					Devices []struct {
						Name  string
						Count int
					}
				}
			}
		}
	}
}

// renderJob renders deploy/nomad/switchyard.nomad.hcl for svc with the
// CLI's own HCL2 parser (variables, validation, dynamic blocks), as
// `nomad job run` would submit it, without a Nomad agent.
func renderJob(t *testing.T, nomad, svc string, vars ...string) renderedJob {
	t.Helper()
	args := append([]string{"job", "run", "-output", "-var", "service=" + svc, "-var", "version=0.1.0",
		"-var", "checksum=" + strings.Repeat("ab", 32), "-var", "artifact_base=https://releases.invalid/switchyard"}, vars...)
	out, err := exec.Command(nomad, append(args, nomadJob)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nomad job run -output %s: %v\n%s", svc, err, out)
	}
	var j renderedJob
	if err := json.Unmarshal(out, &j); err != nil {
		t.Fatalf("rendered %s job: %v\n%s", svc, err, out)
	}
	if len(j.Job.TaskGroups) != 1 || len(j.Job.TaskGroups[0].Tasks) != 1 {
		t.Fatalf("%s: want one group with one task:\n%s", svc, out)
	}
	return j
}

// runtimeVar matches what Nomad interpolates on the client.
var runtimeVar = regexp.MustCompile(`\$\{([A-Za-z0-9_.-]+)\}`)

// Every flag the job file passes exists in the service it starts: the
// binary parses the rendered job's args, with every optional flag on
// (Redis, the planner's Nomad actuator), and -version, so it exits
// before doing anything else. A flag renamed in code but not in the job
// file would otherwise fail only at deploy time. The job and group names
// are the planner's contract (services/planner/internal/actuate).
func TestNomadJobArgsParse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every service; skipped under -short")
	}
	nomad := deptest.Binary(t, "nomad", "NOMAD_BIN")
	bin := Build(t)
	for _, svc := range Services {
		t.Run(svc, func(t *testing.T) {
			j := renderJob(t, nomad, svc, "-var", "redis_addr=127.0.0.1:6379",
				"-var", "nomad_addr=http://127.0.0.1:4646", "-var", "gpus=1")
			g := j.Job.TaskGroups[0]
			task := g.Tasks[0]
			if j.Job.ID != "switchyard-"+svc || g.Name != svc {
				t.Errorf("job %q group %q, want switchyard-%s and %s", j.Job.ID, g.Name, svc, svc)
			}
			if a := task.Artifacts; len(a) != 1 || a[0].GetterOptions["checksum"] != "sha256:"+strings.Repeat("ab", 32) ||
				a[0].GetterSource != "https://releases.invalid/switchyard/"+svc+"-0.1.0-linux-amd64.tar.gz" {
				t.Errorf("artifact %+v", a)
			}
			worker := svc == "decode" || svc == "prefill"
			if gpu := len(task.Resources.Devices) == 1 && task.Resources.Devices[0].Name == "nvidia/gpu"; gpu != worker {
				t.Errorf("devices %+v with gpus=1: want a GPU for prefill and decode only", task.Resources.Devices)
			}
			args := make([]string, len(task.Config.Args))
			for i, a := range task.Config.Args {
				args[i] = runtimeVar.ReplaceAllStringFunc(a, func(v string) string {
					switch name := runtimeVar.FindStringSubmatch(v)[1]; {
					case strings.HasPrefix(name, "NOMAD_ADDR_"):
						return "127.0.0.1:0"
					case strings.HasSuffix(name, "_DIR"):
						return t.TempDir()
					case name == "NOMAD_SHORT_ALLOC_ID":
						return "0123abcd"
					default:
						t.Fatalf("arg %q: unexpected runtime variable %s", a, v)
						return ""
					}
				})
			}
			out, err := exec.Command(bin+"/"+svc, append(args, "-version")...).CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), svc+" ") {
				t.Fatalf("%s %s -version: %v\n%s", svc, strings.Join(args, " "), err, out)
			}
		})
	}
}

// The GPU request and the worker flags are there only where they belong:
// no device with gpus=0 (the default), a device of the asked count with
// gpus=2.
func TestNomadJobGPUs(t *testing.T) {
	nomad := deptest.Binary(t, "nomad", "NOMAD_BIN")
	for _, tc := range []struct {
		svc, gpus string
		want      int
	}{{"decode", "0", 0}, {"decode", "2", 2}, {"prefill", "1", 1}, {"router", "2", 0}} {
		t.Run(tc.svc+"-"+tc.gpus, func(t *testing.T) {
			t.Parallel()
			task := renderJob(t, nomad, tc.svc, "-var", "gpus="+tc.gpus).Job.TaskGroups[0].Tasks[0]
			got := 0
			for _, d := range task.Resources.Devices {
				if d.Name == "nvidia/gpu" {
					got += d.Count
				}
			}
			if got != tc.want {
				t.Errorf("%s with gpus=%s: %d GPUs requested, want %d", tc.svc, tc.gpus, got, tc.want)
			}
		})
	}
}

// Mutual TLS is the default: the certificate flags and their templates,
// the health port the Consul checks use (the main port takes mesh callers
// only) and, for the frontend, the public listener's files. With
// tls=false none of that, and the checks on the main port as before.
func TestNomadJobTLS(t *testing.T) {
	nomad := deptest.Binary(t, "nomad", "NOMAD_BIN")
	for _, tc := range []struct {
		svc   string
		tls   bool
		files []string // templates besides the frontend's api-keys
	}{
		{"router", true, []string{"tls-ca.crt", "tls.crt", "tls.key"}},
		{"decode", true, []string{"tls-ca.crt", "tls.crt", "tls.key"}},
		{"frontend", true, []string{"tls-ca.crt", "tls.crt", "tls.key", "public.crt", "public.key"}},
		{"router", false, nil},
		{"frontend", false, nil},
	} {
		t.Run(fmt.Sprintf("%s-tls=%v", tc.svc, tc.tls), func(t *testing.T) {
			t.Parallel()
			g := renderJob(t, nomad, tc.svc, "-var", fmt.Sprintf("tls=%v", tc.tls)).Job.TaskGroups[0]
			task := g.Tasks[0]
			var files []string
			for _, tp := range task.Templates {
				if f := strings.TrimPrefix(tp.DestPath, "${NOMAD_SECRETS_DIR}/"); f != "api-keys" {
					files = append(files, f)
				}
			}
			if !slices.Equal(files, tc.files) {
				t.Errorf("templates %q, want %q", files, tc.files)
			}
			args := strings.Join(task.Config.Args, " ")
			for _, flag := range []string{"-tls-cert ${NOMAD_SECRETS_DIR}/tls.crt", "-tls-ca ${NOMAD_SECRETS_DIR}/tls-ca.crt",
				"-health-listen ${NOMAD_ADDR_health}"} {
				if strings.Contains(args, flag) != tc.tls {
					t.Errorf("args %q: %q present %v, want %v", args, flag, !tc.tls, tc.tls)
				}
			}
			if public := strings.Contains(args, "-public-tls-cert"); public != (tc.tls && tc.svc == "frontend") {
				t.Errorf("args %q: -public-tls-cert present %v", args, public)
			}
			var ports []string
			for _, p := range g.Networks[0].DynamicPorts {
				ports = append(ports, p.Label)
			}
			if slices.Contains(ports, "health") != tc.tls {
				t.Errorf("ports %q: a health port only with TLS", ports)
			}
			want := map[bool]string{true: "health", false: "http"}[tc.tls]
			for _, c := range g.Services[0].Checks {
				if c.PortLabel != want {
					t.Errorf("check %s on port %q, want %q", c.Name, c.PortLabel, want)
				}
			}
		})
	}
}
