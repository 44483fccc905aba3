package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// snapshot is the part of the console's snapshot the commands print
// (services/frontend/internal/fleet defines the whole).
type snapshot struct {
	Seq       uint64     `json:"seq"`
	Instances []instance `json:"instances"`
	Plan      *struct {
		Reason string `json:"reason"`
		Leader bool   `json:"leader"`
		Pools  []struct {
			Model    string `json:"model"`
			Role     string `json:"role"`
			Observed uint32 `json:"observed"`
			Desired  uint32 `json:"desired"`
			Rule     string `json:"rule"`
			Reason   string `json:"reason"`
			Pending  bool   `json:"pending"`
		} `json:"pools"`
	} `json:"plan"`
	Errors []string `json:"errors"`
}

type instance struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Model   string `json:"model"`
	Version string `json:"version"`
	Address string `json:"address"`
	Canary  bool   `json:"canary"`
	Health  string `json:"health"`
	Load    *struct {
		Running uint32 `json:"running"`
		Waiting uint32 `json:"waiting"`
		KV      []struct {
			Name  string  `json:"name"`
			Used  *uint32 `json:"used"`
			Total uint32  `json:"total"`
		} `json:"kv"`
	} `json:"load"`
}

func instances(ctx context.Context, o options, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("instances", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	role := fs.String("role", "", "only instances of this role")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError("usage: instances [-role ROLE]")
	}
	var raw json.RawMessage
	if err := o.call(ctx, http.MethodGet, "snapshot", nil, &raw); err != nil {
		return err
	}
	var s snapshot
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if o.json {
		return printJSON(w, raw)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tMODEL\tVERSION\tCANARY\tHEALTH\tRUNNING\tWAITING\tKV")
	for _, in := range s.Instances {
		if *role != "" && in.Role != *role {
			continue
		}
		run, wait, kv := "-", "-", "-"
		if in.Load != nil {
			run, wait = fmt.Sprint(in.Load.Running), fmt.Sprint(in.Load.Waiting)
			kv = tiers(in)
		}
		canary := ""
		if in.Canary {
			canary = "canary"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.ID, in.Role, dash(in.Model), in.Version, canary, in.Health, run, wait, kv)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range s.Errors {
		fmt.Fprintf(w, "warning: %s\n", e)
	}
	return nil
}

// tiers is "device=12/100 host=4096": used/total where the worker
// reports use, else the capacity.
func tiers(in instance) string {
	var parts []string
	for _, t := range in.Load.KV {
		if t.Used != nil {
			parts = append(parts, fmt.Sprintf("%s=%d/%d", t.Name, *t.Used, t.Total))
		} else {
			parts = append(parts, fmt.Sprintf("%s=%d", t.Name, t.Total))
		}
	}
	return strings.Join(parts, " ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plan(ctx context.Context, o options, args []string, w io.Writer) error {
	if len(args) > 0 {
		return usageError("usage: plan")
	}
	var raw json.RawMessage
	if err := o.call(ctx, http.MethodGet, "snapshot", nil, &raw); err != nil {
		return err
	}
	var s snapshot
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if o.json {
		return printJSON(w, raw)
	}
	if s.Plan == nil {
		fmt.Fprintln(w, "no planner answered")
		return nil
	}
	fmt.Fprintf(w, "planner: %s (leader %v)\n", s.Plan.Reason, s.Plan.Leader)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tROLE\tOBSERVED\tDESIRED\tRULE\tREASON")
	for _, p := range s.Plan.Pools {
		desired := fmt.Sprint(p.Desired)
		if p.Pending {
			desired += " (pending)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", p.Model, p.Role, p.Observed, desired, p.Rule, p.Reason)
	}
	return tw.Flush()
}

func drain(ctx context.Context, o options, args []string, w io.Writer) error {
	if len(args) != 1 || args[0] == "" {
		return usageError("usage: drain ID")
	}
	var out struct {
		ID   string `json:"id"`
		Pool string `json:"pool"`
	}
	if err := o.postID(ctx, "drain", args[0], &out); err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(w).Encode(out)
	}
	fmt.Fprintf(w, "draining %s (pool %s)\n", out.ID, out.Pool)
	return nil
}

func clearCache(ctx context.Context, o options, args []string, w io.Writer) error {
	if len(args) != 1 || args[0] == "" {
		return usageError("usage: clear-cache ID")
	}
	var out struct {
		ID    string `json:"id"`
		After uint32 `json:"kv_blocks_used_after"`
		Freed uint32 `json:"kv_blocks_freed"`
	}
	if err := o.postID(ctx, "clear-cache", args[0], &out); err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(w).Encode(out)
	}
	fmt.Fprintf(w, "cleared %s: %d KV blocks freed, %d in use\n", out.ID, out.Freed, out.After)
	return nil
}

func index(ctx context.Context, o options, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("index", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	limit := fs.Uint("limit", 20, "block hashes to list per router (at most 10000)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 || fs.Arg(0) == "" {
		return usageError("usage: index [-limit N] ID")
	}
	var raw json.RawMessage
	if err := o.call(ctx, http.MethodGet, "index?worker="+url.QueryEscape(fs.Arg(0))+"&limit="+strconv.FormatUint(uint64(*limit), 10), nil, &raw); err != nil {
		return err
	}
	if o.json {
		return printJSON(w, raw)
	}
	var out struct {
		Worker  string `json:"worker"`
		Routers []struct {
			Router       string            `json:"router"`
			Found        bool              `json:"found"`
			NextSequence uint64            `json:"next_sequence"`
			Blocks       uint32            `json:"blocks"`
			PerTier      map[string]uint32 `json:"blocks_per_tier"`
			Hashes       []string          `json:"block_hashes"`
			Error        string            `json:"error"`
		} `json:"routers"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return err
	}
	for _, r := range out.Routers {
		switch {
		case r.Error != "":
			fmt.Fprintf(w, "%s: error: %s\n", r.Router, r.Error)
		case !r.Found:
			fmt.Fprintf(w, "%s: does not follow %s\n", r.Router, out.Worker)
		default:
			var tiers []string
			for _, t := range slices.Sorted(maps.Keys(r.PerTier)) {
				tiers = append(tiers, fmt.Sprintf("%s=%d", t, r.PerTier[t]))
			}
			fmt.Fprintf(w, "%s: %d blocks (%s), next sequence %d\n", r.Router, r.Blocks, dash(strings.Join(tiers, " ")), r.NextSequence)
			if len(r.Hashes) > 0 {
				fmt.Fprintf(w, "  %s\n", strings.Join(r.Hashes, " "))
			}
		}
	}
	return nil
}

// postID posts {"id": id} to an admin action of the console API.
func (o options) postID(ctx context.Context, path, id string, out any) error {
	body, err := json.Marshal(map[string]string{"id": id})
	if err != nil {
		return err
	}
	return o.call(ctx, http.MethodPost, path, bytes.NewReader(body), out)
}

func printJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}
