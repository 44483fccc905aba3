package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"text/tabwriter"
)

// rolloutView is a rollout as the console API shows it.
type rolloutView struct {
	Role     string   `json:"role"`
	Version  string   `json:"version"`
	Weight   float64  `json:"weight"`
	Judge    bool     `json:"judge"`
	State    string   `json:"state"`
	Reason   string   `json:"reason"`
	Canary   sideView `json:"canary"`
	Baseline sideView `json:"baseline"`
}

type sideView struct {
	Requests float64 `json:"requests"`
	Errors   float64 `json:"errors"`
	TTFTP50  float64 `json:"ttft_p50"`
	ITLP50   float64 `json:"itl_p50"`
}

// rollouts lists the planner's rollouts from the snapshot.
func rollouts(ctx context.Context, o options, args []string, w io.Writer) error {
	if len(args) != 0 {
		return usageError("usage: rollouts")
	}
	var s struct {
		Plan *struct {
			Rollouts []rolloutView `json:"rollouts"`
		} `json:"plan"`
	}
	var raw json.RawMessage
	if err := o.call(ctx, http.MethodGet, "snapshot", nil, &raw); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	var rs []rolloutView
	if s.Plan != nil {
		rs = s.Plan.Rollouts
	}
	if o.json {
		return json.NewEncoder(w).Encode(rs)
	}
	if len(rs) == 0 {
		fmt.Fprintln(w, "no rollouts")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tVERSION\tWEIGHT\tSTATE\tCANARY REQ/ERR\tBASELINE REQ/ERR\tTTFT p50 C/B\tREASON")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f/%.0f\t%.0f/%.0f\t%s/%s\t%s\n", r.Role, r.Version, strconv.FormatFloat(r.Weight, 'g', -1, 64), r.State,
			r.Canary.Requests, r.Canary.Errors, r.Baseline.Requests, r.Baseline.Errors, secs(r.Canary.TTFTP50), secs(r.Baseline.TTFTP50), r.Reason)
	}
	return tw.Flush()
}

func secs(s float64) string {
	if s == 0 {
		return "-"
	}
	return strconv.FormatFloat(s*1000, 'f', 1, 64) + "ms"
}

// canary starts a rollout or sets its weight.
func canary(ctx context.Context, o options, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("canary", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	judge := fs.Bool("judge", false, "let the planner's judge step the weight up and promote or abort")
	if err := fs.Parse(args); err != nil || fs.NArg() != 3 {
		return usageError("usage: canary [-judge] ROLE VERSION WEIGHT")
	}
	weight, err := strconv.ParseFloat(fs.Arg(2), 64)
	if err != nil || weight < 0 || weight > 1 {
		return usageError(fmt.Sprintf("canary: weight %q: want a number in [0, 1]", fs.Arg(2)))
	}
	body, _ := json.Marshal(map[string]any{"role": fs.Arg(0), "version": fs.Arg(1), "weight": weight, "judge": *judge})
	return o.rolloutCall(ctx, "rollout", body, w)
}

// endRollout promotes or aborts a role's rollout.
func endRollout(ctx context.Context, o options, promote bool, args []string, w io.Writer) error {
	name := map[bool]string{true: "promote", false: "abort"}[promote]
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	reason := fs.String("reason", "", "why, for the record")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		return usageError("usage: " + name + " [-reason TEXT] ROLE")
	}
	body, _ := json.Marshal(map[string]any{"role": fs.Arg(0), "promote": promote, "reason": *reason})
	return o.rolloutCall(ctx, "rollout/end", body, w)
}

func (o options) rolloutCall(ctx context.Context, path string, body []byte, w io.Writer) error {
	var r rolloutView
	if err := o.call(ctx, http.MethodPost, path, bytes.NewReader(body), &r); err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(w).Encode(r)
	}
	fmt.Fprintf(w, "%s %s: %s at weight %s (%s)\n", r.Role, r.Version, r.State, strconv.FormatFloat(r.Weight, 'g', -1, 64), r.Reason)
	return nil
}

// cordon stops or resumes new requests to a worker that stays up.
func cordon(ctx context.Context, o options, on bool, args []string, w io.Writer) error {
	name := map[bool]string{true: "cordon", false: "uncordon"}[on]
	if len(args) != 1 || args[0] == "" {
		return usageError("usage: " + name + " ID")
	}
	body, _ := json.Marshal(map[string]any{"id": args[0], "cordoned": on})
	var out struct {
		ID       string `json:"id"`
		Cordoned bool   `json:"cordoned"`
		Running  uint32 `json:"running_requests"`
	}
	if err := o.call(ctx, http.MethodPost, "cordon", bytes.NewReader(body), &out); err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(w).Encode(out)
	}
	if out.Cordoned {
		fmt.Fprintf(w, "cordoned %s: no new requests; %d still running\n", out.ID, out.Running)
	} else {
		fmt.Fprintf(w, "uncordoned %s: taking requests\n", out.ID)
	}
	return nil
}
