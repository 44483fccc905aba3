// Package ctl is `switchyard ctl`, the operator's command line over a
// frontend's console API (/console/api/...): what the web console shows,
// as text, and its admin actions. It reads the same shared snapshot the
// page does, so running it costs the mesh nothing beyond one HTTP call.
//
//	switchyard ctl [-url URL] [-key KEY] [-json] instances [-role ROLE]
//	switchyard ctl [-url URL] [-key KEY] [-json] plan
//	switchyard ctl [-url URL] [-key KEY] drain ID
//	switchyard ctl [-url URL] [-key KEY] clear-cache ID
//	switchyard ctl [-url URL] [-key KEY] [-json] index [-limit N] ID
//	switchyard ctl [-url URL] [-key KEY] cordon|uncordon ID
//	switchyard ctl [-url URL] [-key KEY] [-json] rollouts
//	switchyard ctl [-url URL] [-key KEY] canary [-judge] ROLE VERSION WEIGHT
//	switchyard ctl [-url URL] [-key KEY] promote|abort [-reason TEXT] ROLE
package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Exit codes, as the services use them.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// Env is the command's environment, injected for tests.
type Env struct {
	Args   []string
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Client makes the HTTP calls; default a client with a 30 s timeout.
	Client *http.Client
}

// options are the flags shared by every subcommand.
type options struct {
	url, key string
	json     bool
	client   *http.Client
}

// Run runs one subcommand and returns the exit code.
func Run(ctx context.Context, env Env) int {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	fs := flag.NewFlagSet("switchyard ctl", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	var o options
	fs.StringVar(&o.url, "url", firstOf(env.Getenv("SWITCHYARD_URL"), "http://127.0.0.1:8000"), "the frontend's base URL (also SWITCHYARD_URL)")
	fs.StringVar(&o.key, "key", env.Getenv("SWITCHYARD_API_KEY"), "API key (also SWITCHYARD_API_KEY); drain needs an admin key")
	fs.BoolVar(&o.json, "json", false, "print the console API's JSON")
	fs.Usage = func() { usage(env.Stderr, fs) }
	if err := fs.Parse(env.Args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	o.url = strings.TrimRight(o.url, "/")
	o.client = env.Client
	if o.client == nil {
		o.client = &http.Client{Timeout: 30 * time.Second}
	}
	args := fs.Args()
	if len(args) == 0 {
		usage(env.Stderr, fs)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "instances":
		err = instances(ctx, o, args[1:], env.Stdout)
	case "plan":
		err = plan(ctx, o, args[1:], env.Stdout)
	case "drain":
		err = drain(ctx, o, args[1:], env.Stdout)
	case "clear-cache":
		err = clearCache(ctx, o, args[1:], env.Stdout)
	case "index":
		err = index(ctx, o, args[1:], env.Stdout)
	case "cordon":
		err = cordon(ctx, o, true, args[1:], env.Stdout)
	case "uncordon":
		err = cordon(ctx, o, false, args[1:], env.Stdout)
	case "rollouts":
		err = rollouts(ctx, o, args[1:], env.Stdout)
	case "canary":
		err = canary(ctx, o, args[1:], env.Stdout)
	case "promote":
		err = endRollout(ctx, o, true, args[1:], env.Stdout)
	case "abort":
		err = endRollout(ctx, o, false, args[1:], env.Stdout)
	default:
		err = usageError(fmt.Sprintf("unknown command %q", args[0]))
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(env.Stderr, "switchyard ctl: %v\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(env.Stderr, "switchyard ctl: %v\n", err)
		return exitFail
	}
	return exitOK
}

type usageError string

func (e usageError) Error() string { return string(e) }

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `usage: switchyard ctl [flags] instances [-role ROLE]   instances, load and KV per tier
       switchyard ctl [flags] plan                       the planner's desired vs observed pools
       switchyard ctl [flags] drain ID                   drain a worker (admin key, supervisor)
       switchyard ctl [flags] clear-cache ID             clear a worker's prefix cache (admin key)
       switchyard ctl [flags] index [-limit N] ID        what each router's KV index holds for a worker
       switchyard ctl [flags] cordon|uncordon ID         stop or resume new requests to a worker that stays up (admin key)
       switchyard ctl [flags] rollouts                   the canary rollouts and their judge's view
       switchyard ctl [flags] canary [-judge] ROLE VERSION WEIGHT
                                                         start a canary rollout or set its weight (admin key)
       switchyard ctl [flags] promote|abort [-reason TEXT] ROLE
                                                         end a role's rollout (admin key)

flags:
`)
	fs.PrintDefaults()
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// call does one console API request and decodes its JSON answer into
// out (raw, when out is a *json.RawMessage).
func (o options) call(ctx context.Context, method, path string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, o.url+"/console/api/"+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if o.key != "" {
		req.Header.Set("Authorization", "Bearer "+o.key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("%s: %s: %s", path, resp.Status, e.Error.Message)
		}
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
