package httpapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"switchyard.dev/services/frontend/internal/catalog"
	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/openai"
	"switchyard.dev/services/frontend/internal/upstream"
)

// retryAfter is what 503s ask clients to wait: long enough for discovery
// to notice a new worker or router, short enough not to idle.
const retryAfter = time.Second

// apiError maps any failure to the error the client sees.
func apiError(err error, model string) *openai.Error {
	var e *openai.Error
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &maxBytes):
		return openai.TooLarge(maxBytes.Limit)
	case errors.Is(err, catalog.ErrUnknownModel):
		return openai.ModelNotFound(model)
	case errors.Is(err, upstream.ErrNoRouter):
		return openai.Unavailable(retryAfter, "No router is available; retry shortly.")
	case errors.Is(err, generate.ErrWorkerContract):
		return &openai.Error{Status: http.StatusBadGateway, Type: openai.TypeServer, Message: "Upstream error: the worker's reply was malformed."}
	case errors.Is(err, context.DeadlineExceeded):
		return &openai.Error{Status: http.StatusGatewayTimeout, Type: openai.TypeServer, Code: "timeout", Message: "The request timed out."}
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return openai.Internal("Internal error.")
	}
	switch ce.Code() {
	case connect.CodeUnavailable, connect.CodeResourceExhausted, connect.CodeAborted, connect.CodeCanceled:
		return openai.Unavailable(retryAfter, "No worker is available for model %q; retry shortly.", model)
	case connect.CodeNotFound:
		return openai.ModelNotFound(model)
	case connect.CodeInvalidArgument, connect.CodeOutOfRange, connect.CodeFailedPrecondition:
		return openai.Invalid(workerParam(ce), "%s", ce.Message())
	case connect.CodeDeadlineExceeded:
		return &openai.Error{Status: http.StatusGatewayTimeout, Type: openai.TypeServer, Code: "timeout", Message: "The request timed out upstream."}
	default:
		return &openai.Error{Status: http.StatusBadGateway, Type: openai.TypeServer, Message: fmt.Sprintf("Upstream error: %s.", ce.Code())}
	}
}

// workerParams maps the GenerateRequest fields a worker names in its
// rejections (a google.rpc.BadRequest detail) to the OpenAI parameter
// behind them. A worker without logits (the sim executor) refuses
// sampling.logprobs, for example. Fields with no single OpenAI parameter
// (the prompt's token ids are "messages" or "prompt") are left unnamed.
var workerParams = map[string]string{
	"sampling.logprobs":          "logprobs",
	"sampling.presence_penalty":  "presence_penalty",
	"sampling.frequency_penalty": "frequency_penalty",
	"sampling.logit_bias":        "logit_bias",
	"sampling.constraint":        "response_format",
	"stop.max_tokens":            "max_tokens",
	"stop.stop":                  "stop",
	"stop.stop_token_ids":        "stop_token_ids",
}

// workerParam names the parameter a worker's rejection is about, from the
// field its error detail names; "" when it names none we know. (Workers
// before 0.3.0 send no detail: the message still says what was wrong.)
func workerParam(ce *connect.Error) string {
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			continue
		}
		if br, ok := v.(*errdetails.BadRequest); ok {
			for _, fv := range br.GetFieldViolations() {
				if p, ok := workerParams[fv.GetField()]; ok {
					return p
				}
			}
		}
	}
	return ""
}

// genError is apiError for a generation under way. A worker that refuses
// stop.max_tokens is refusing whichever of max_tokens and
// max_completion_tokens the client sent, and the error names that one;
// one that refuses sampling.constraint is refusing the field the format
// came from (response_format, or tool_choice for a forced call); a
// router that knows no worker of the pinned id is not saying the model is
// unknown.
func genError(err error, g openai.Generation) *openai.Error {
	if g.Hints.WorkerID != "" && connect.CodeOf(err) == connect.CodeNotFound {
		// The router knows no such worker: not an unknown model.
		return &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest, Param: "switchyard.worker_id", Code: "worker_not_found",
			Message: fmt.Sprintf("No worker %q serves model %q.", g.Hints.WorkerID, g.Model)}
	}
	e := apiError(err, g.Model)
	switch {
	case e.Param == workerParams["stop.max_tokens"] && g.MaxTokensParam != "" && g.MaxTokensParam != e.Param:
		return renamed(e, g.MaxTokensParam)
	case e.Param == workerParams["sampling.constraint"] && g.Format.Param != "" && g.Format.Param != e.Param:
		return renamed(e, g.Format.Param)
	}
	return e
}

// renamed is e naming param. e may be shared (errors.As): it changes a
// copy.
func renamed(e *openai.Error, param string) *openai.Error {
	named := *e
	named.Param = param
	return &named
}

// fail answers with err, which must happen before anything was written.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error, model string) {
	a.failWith(w, r, err, model, apiError(err, model))
}

// failWith answers with e, the client's view of err.
func (a *API) failWith(w http.ResponseWriter, r *http.Request, err error, model string, e *openai.Error) {
	if e.Status >= 500 {
		a.cfg.Logger.WarnContext(r.Context(), "request failed", "path", r.URL.Path, "model", model, "status", e.Status, "err", err)
	}
	a.writeError(w, e)
}

func (a *API) writeError(w http.ResponseWriter, e *openai.Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
	}
	writeJSON(w, e.Status, e.Body())
}
