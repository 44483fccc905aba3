package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func client(m *Mesh) openai.Client {
	return openai.NewClient(option.WithBaseURL(m.URL()), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func waitModel(t *testing.T, c openai.Client) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		page, err := c.Models.List(t.Context())
		if err == nil && len(page.Data) > 0 {
			return page.Data[0].ID
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no model listed within 60s")
	return ""
}

// waitServing waits until model answers a one-token completion: a model
// is listed as soon as one worker registers, before every router has
// found a worker to send it to.
func waitServing(t *testing.T, c openai.Client, model string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := c.Completions.New(t.Context(), openai.CompletionNewParams{
			Model:  openai.CompletionNewParamsModel(model),
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")}, MaxTokens: openai.Int(1),
		})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("model %s not served within 60s: %v", model, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The official SDK works unchanged against the real mesh: models, chat and
// completions, streaming and not, and OpenAI-shaped errors.
func TestOpenAISDKAgainstMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	model, tok := StoriesModel(t)
	m := StartMesh(t, 2, "kv", "-executor", "llama", "-model", model, "-tokenizer", tok)
	c := client(m)
	id := waitModel(t, c)
	ctx := t.Context()

	comp, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModel(id),
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(24), Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(comp.Choices[0].Text, ", there was a little girl named Lily.") || comp.Usage.CompletionTokens != 24 {
		t.Fatalf("completion = %q usage %+v", comp.Choices[0].Text, comp.Usage)
	}

	chat, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:     id,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story.")},
		MaxTokens: openai.Int(16), Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if chat.Choices[0].Message.Content == "" || chat.Usage.TotalTokens == 0 || chat.Object != "chat.completion" {
		t.Fatalf("chat = %+v", chat)
	}

	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:     id,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story.")},
		MaxTokens: openai.Int(16), Temperature: openai.Float(0),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != chat.Choices[0].Message.Content || acc.Usage.CompletionTokens != chat.Usage.CompletionTokens {
		t.Fatalf("streamed %q (%d tokens) != non-streamed %q (%d)", acc.Choices[0].Message.Content,
			acc.Usage.CompletionTokens, chat.Choices[0].Message.Content, chat.Usage.CompletionTokens)
	}

	_, err = c.Completions.New(ctx, openai.CompletionNewParams{
		Model: "no-such-model", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown model: err = %v; want a 404 openai.Error", err)
	}
	_, err = c.Completions.New(ctx, openai.CompletionNewParams{
		Model: openai.CompletionNewParamsModel(id), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")},
		Temperature: openai.Float(7),
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "temperature" {
		t.Fatalf("temperature 7: err = %v; want 400 on param temperature", err)
	}
}

// Killing a worker process during 50 concurrent greedy streams loses
// nothing: every stream completes, and each text equals the undisturbed run.
func TestWorkerKilledDuringStreamsMigrates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	model, tok := StoriesModel(t)
	const streams, maxTokens = 50, 96
	m := StartMesh(t, 3, "round-robin", "-executor", "llama", "-model", model, "-tokenizer", tok)
	c := client(m)
	id := waitModel(t, c)
	prompts := make([]string, streams)
	names := []string{"Lily", "Tom", "Sue", "Ben", "Max", "Mia", "Sam", "Zoe", "Tim", "Amy"}
	for i := range prompts {
		prompts[i] = fmt.Sprintf("Once upon a time, %s saw a %d", names[i%len(names)], i)
	}
	want, _ := runStreams(t, c, id, prompts, maxTokens, nil)
	var kills atomic.Bool
	got, usage := runStreams(t, c, id, prompts, maxTokens, func(total int) {
		if total >= streams*4 && kills.CompareAndSwap(false, true) {
			m.Workers[1].Signal(t, syscall.SIGKILL)
		}
	})
	if !kills.Load() {
		t.Fatal("the worker was never killed")
	}
	if n := metricSum(t, "http://"+m.Frontend.Addr+"/metrics", "switchyard_frontend_migrations_total"); n < 1 {
		t.Fatalf("migrations_total = %v: the killed worker carried no stream, so nothing was tested", n)
	} else {
		t.Logf("%v streams migrated after the kill", n)
	}
	for i := range prompts {
		if got[i] != want[i] {
			t.Errorf("stream %d: text after kill %q != undisturbed %q", i, got[i], want[i])
		}
		if usage[i] != maxTokens {
			t.Errorf("stream %d: completion_tokens = %d; want %d", i, usage[i], maxTokens)
		}
	}
}

// metricSum adds up every sample of a Prometheus metric.
func metricSum(t *testing.T, url, name string) float64 {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// runStreams runs one streaming completion per prompt concurrently; onChunk
// sees the running total of chunks across all streams.
func runStreams(t *testing.T, c openai.Client, model string, prompts []string, maxTokens int64, onChunk func(total int)) ([]string, []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	texts := make([]string, len(prompts))
	usage := make([]int64, len(prompts))
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(prompts))
	for i, p := range prompts {
		wg.Go(func() {
			s := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
				Model:     openai.CompletionNewParamsModel(model),
				Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(p)},
				MaxTokens: openai.Int(maxTokens), Temperature: openai.Float(0),
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			}, option.WithJSONSet("ignore_eos", true))
			var b strings.Builder
			for s.Next() {
				ch := s.Current()
				if len(ch.Choices) > 0 {
					b.WriteString(ch.Choices[0].Text)
				}
				if ch.Usage.CompletionTokens > 0 {
					usage[i] = ch.Usage.CompletionTokens
				}
				if n := total.Add(1); onChunk != nil {
					onChunk(int(n))
				}
			}
			if err := s.Err(); err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
			}
			texts[i] = b.String()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return texts, usage
}
