package vllm

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Info is what an engine says about itself at start-up.
type Info struct {
	Models []string // ids listed by /v1/models (served names and aliases)
	// BlockSize is the engine's KV block size in tokens: vLLM's
	// vllm:cache_config_info block_size, SGLang's page_size from
	// /server_info; 0 when the engine does not say.
	BlockSize int
	// PrefixCaching is vLLM's enable_prefix_caching label ("True" or
	// "False"); "" when not published (SGLang caches prefixes unless
	// started with --disable-radix-cache).
	PrefixCaching string
}

// Info asks the engine which models it serves and its block size.
func (c *Client) Info(ctx context.Context) (Info, error) {
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := c.getJSON(ctx, "/v1/models", &models); err != nil {
		return Info{}, err
	}
	var info Info
	for _, m := range models.Data {
		info.Models = append(info.Models, m.ID)
	}
	if c.cfg.Kind == VLLM {
		l, err := c.Load(ctx)
		if err != nil {
			return Info{}, err
		}
		info.BlockSize, info.PrefixCaching = l.BlockSize, l.CacheConfig["enable_prefix_caching"]
		return info, nil
	}
	var server struct {
		PageSize int `json:"page_size"`
	}
	err := c.getJSON(ctx, "/server_info", &server)
	var ee *EngineError
	if errors.As(err, &ee) && ee.Status == 404 {
		err = c.getJSON(ctx, "/get_server_info", &server) // SGLang before /server_info
	}
	if err != nil {
		return Info{}, err
	}
	info.BlockSize = server.PageSize
	return info, nil
}

// Check verifies, before a worker registers, that the engine answers,
// serves model and caches blocks of blockSize tokens (the worker's block
// size, which the router hashes requests with). Each failure is one error
// that names the engine and the setting to change. An engine that does
// not report its block size passes; the re-hasher refuses its first event
// of another size.
func (c *Client) Check(ctx context.Context, model string, blockSize int) error {
	info, err := c.Info(ctx)
	if err != nil {
		return fmt.Errorf("%s engine at %s does not answer as one: %w", c.cfg.Kind, c.base, err)
	}
	if !slices.Contains(info.Models, model) {
		return fmt.Errorf("%s engine at %s serves %q, not model %q (set the engine's served model name, or the worker's model)", c.cfg.Kind, c.base, info.Models, model)
	}
	if info.PrefixCaching == "False" {
		return fmt.Errorf("vllm engine at %s runs without prefix caching, so it publishes no KV events: start it with --enable-prefix-caching", c.base)
	}
	if info.BlockSize != 0 && info.BlockSize != blockSize {
		flag := "--block-size"
		if c.cfg.Kind == SGLang {
			flag = "--page-size"
		}
		return fmt.Errorf("%s engine at %s caches %d-token blocks, the worker's block size is %d: start the engine with %s %d or the worker with -block-size %d",
			c.cfg.Kind, c.base, info.BlockSize, blockSize, flag, blockSize, info.BlockSize)
	}
	return nil
}
