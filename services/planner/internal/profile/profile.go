package profile

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Version is the profile format this package reads and writes. A change
// that an older planner would misread bumps it.
const Version = 1

// Profile is the measured performance of one model on one executor.
type Profile struct {
	Version int `json:"version"`
	// Model is the served model name the measurements are for; Load
	// refuses a profile for another model.
	Model string `json:"model"`
	// Executor names what ran the model ("sim", "vllm", ...); informational.
	Executor string `json:"executor,omitempty"`
	// BlockSize is tokens per KV block and KVBlocks the blocks of KV cache
	// one replica has; together they bound the decode batch.
	BlockSize int `json:"block_size"`
	KVBlocks  int `json:"kv_blocks"`
	// MeasuredAt is when the measurement ran; informational.
	MeasuredAt time.Time `json:"measured_at,omitzero"`
	// Prefill are prefill times, sorted by strictly increasing InputTokens.
	Prefill []PrefillPoint `json:"prefill"`
	// Decode are inter-token latencies, sorted by ContextTokens and then by
	// strictly increasing Batch within one context length.
	Decode []DecodePoint `json:"decode"`
}

// PrefillPoint is one prefill of InputTokens new tokens, alone on a
// replica, taking Seconds.
type PrefillPoint struct {
	InputTokens int     `json:"input_tokens"`
	Seconds     float64 `json:"seconds"`
}

// DecodePoint is the inter-token latency of a replica decoding Batch
// sequences whose mean context is ContextTokens.
type DecodePoint struct {
	Batch         int     `json:"batch"`
	ContextTokens int     `json:"context_tokens"`
	ITLSeconds    float64 `json:"itl_seconds"`
}

// Validate reports the first thing that makes p unusable by the math in
// this package; its errors name the offending point.
func (p *Profile) Validate() error {
	switch {
	case p.Version != Version:
		return fmt.Errorf("version %d is not supported (this planner reads version %d)", p.Version, Version)
	case p.Model == "":
		return errors.New("model is empty")
	case p.BlockSize <= 0:
		return fmt.Errorf("block_size %d is not positive", p.BlockSize)
	case p.KVBlocks <= 0:
		return fmt.Errorf("kv_blocks %d is not positive", p.KVBlocks)
	}
	if err := validatePrefill(p.Prefill); err != nil {
		return err
	}
	return validateDecode(p.Decode)
}

func validatePrefill(pts []PrefillPoint) error {
	if len(pts) == 0 {
		return errors.New("prefill has no points")
	}
	for i, pt := range pts {
		switch {
		case pt.InputTokens <= 0:
			return fmt.Errorf("prefill[%d]: input_tokens %d is not positive", i, pt.InputTokens)
		case !positive(pt.Seconds):
			return fmt.Errorf("prefill[%d]: seconds %v is not a positive number", i, pt.Seconds)
		case i > 0 && pt.InputTokens <= pts[i-1].InputTokens:
			return fmt.Errorf("prefill[%d]: input_tokens %d is not above the previous point's %d (points are sorted by input_tokens, no repeats)",
				i, pt.InputTokens, pts[i-1].InputTokens)
		}
	}
	return nil
}

func validateDecode(pts []DecodePoint) error {
	if len(pts) == 0 {
		return errors.New("decode has no points")
	}
	twoBatches := false
	for i, pt := range pts {
		switch {
		case pt.Batch <= 0:
			return fmt.Errorf("decode[%d]: batch %d is not positive", i, pt.Batch)
		case pt.ContextTokens <= 0:
			return fmt.Errorf("decode[%d]: context_tokens %d is not positive", i, pt.ContextTokens)
		case !positive(pt.ITLSeconds):
			return fmt.Errorf("decode[%d]: itl_seconds %v is not a positive number", i, pt.ITLSeconds)
		}
		if i == 0 {
			continue
		}
		prev := pts[i-1]
		if pt.ContextTokens < prev.ContextTokens ||
			pt.ContextTokens == prev.ContextTokens && pt.Batch <= prev.Batch {
			return fmt.Errorf("decode[%d]: (batch %d, context_tokens %d) is out of order after (batch %d, context_tokens %d) (points are sorted by context_tokens, then batch, no repeats)",
				i, pt.Batch, pt.ContextTokens, prev.Batch, prev.ContextTokens)
		}
		if pt.ContextTokens == prev.ContextTokens {
			twoBatches = true
		}
	}
	if !twoBatches {
		return errors.New("decode needs two batch sizes at one context length at least, to extrapolate ITL in batch")
	}
	return nil
}

func positive(v float64) bool { return v > 0 && !math.IsInf(v, 0) }
