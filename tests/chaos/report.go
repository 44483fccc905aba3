package chaos

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable writes the results as a markdown table, then each fault's
// failures and index mismatches.
func WriteTable(w io.Writer, results []Result) {
	fmt.Fprintln(w, "| fault | mechanism | sent | succeeded | failed | wrong text | migrated | retried (client) | broken connections | remote prefills | slowest (s) | index match |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, r := range results {
		p := r.Phase
		match := "yes"
		if !r.Index.Match {
			match = fmt.Sprintf("**no** (%d)", len(r.Index.Mismatches))
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %.1f | %s |\n", r.Fault.Name, r.Fault.Mechanism,
			p.Sent.Load(), p.OK.Load(), p.Failed.Load(), p.Wrong.Load(), p.Migrated.Load(), p.Retried.Load(), p.Broken.Load(),
			p.RemotePrefills.Load(), time.Duration(p.Slowest.Load()).Seconds(), match)
	}
	for _, r := range results {
		errs := r.Phase.Errors()
		if len(errs) == 0 && r.Index.Match && r.Err == nil && r.Note == "" {
			continue
		}
		fmt.Fprintf(w, "\n**%s**\n\n", r.Fault.Name)
		if r.Note != "" {
			fmt.Fprintf(w, "- recovery: %s\n", oneLine(r.Note))
		}
		if r.Err != nil {
			fmt.Fprintf(w, "- fault not injected or recovered: %v\n", r.Err)
		}
		for _, e := range errs {
			fmt.Fprintf(w, "- failure: `%s`\n", oneLine(e))
		}
		for _, m := range r.Index.Mismatches {
			fmt.Fprintf(w, "- index: %s\n", oneLine(m))
		}
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "`", "'")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// Verdict lists how results miss the suite's goals: no request fails for
// the loss of any one process, Consul or Redis (a frontend's loss only
// breaks the connections it held, which the client's retries serve), no
// wrong text, and every router's index matches every worker.
func Verdict(results []Result) []string {
	var out []string
	for _, r := range results {
		if n := r.Phase.Failed.Load(); n > 0 {
			out = append(out, fmt.Sprintf("%s: %d requests failed", r.Fault.Name, n))
		}
		if !r.Fault.Frontend && r.Phase.Broken.Load() > 0 {
			out = append(out, fmt.Sprintf("%s: %d client connections broke, though no frontend was lost", r.Fault.Name, r.Phase.Broken.Load()))
		}
		if !r.Index.Match {
			out = append(out, fmt.Sprintf("%s: %d index mismatches", r.Fault.Name, len(r.Index.Mismatches)))
		}
		if r.Err != nil {
			out = append(out, fmt.Sprintf("%s: %v", r.Fault.Name, r.Err))
		}
	}
	return out
}
