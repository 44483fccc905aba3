// Package mooncake reads Mooncake-format request traces (one JSON object a
// line: timestamp in ms, input_length, output_length, hash_ids) and turns
// their hash ids into deterministic prompt token ids.
//
// A whole trace is parsed and validated before a run starts, so a malformed
// line is reported with its file and line number before any request is sent.
// Both replays of a trace read it here, so they see the same prompts:
// loadtest (against a live mesh) and the router's routesim (on a virtual
// clock).
//
// A RateProfile varies a replay's arrival rate over elapsed time (a
// sinusoid, steps, ramps, or their product), e.g. to exercise an
// autoscaler; a Warper maps trace time to replay time so the rate is
// multiplied by the profile, monotonically and exactly the identity for a
// constant 1. loadtest applies it to trace timestamps (after speed-up) and
// to its own open-loop arrivals alike.
package mooncake

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// Record is one request of a trace.
type Record struct {
	// Line is the 1-based line the record came from.
	Line int
	// TimestampMs is the arrival offset from the start of the trace.
	TimestampMs  float64
	InputLength  int
	OutputLength int
	// HashIDs are prefix-chained ids of fixed-size blocks: two requests that
	// share a leading run of ids share that prompt prefix.
	HashIDs []int64
}

type wireRecord struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
}

// ErrSyntax marks a line that is not a valid trace record.
var ErrSyntax = errors.New("invalid trace record")

// ParseLine decodes and validates one trace line. blockTokens is the number
// of tokens each hash id stands for in the trace (512 for Mooncake); the
// input length must fit in the listed blocks.
func ParseLine(line []byte, blockTokens int) (Record, error) {
	var w wireRecord
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&w); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	if dec.More() {
		return Record{}, fmt.Errorf("%w: trailing data after the JSON object", ErrSyntax)
	}
	switch {
	case w.Timestamp == nil:
		return Record{}, fmt.Errorf("%w: missing timestamp", ErrSyntax)
	case w.InputLength == nil:
		return Record{}, fmt.Errorf("%w: missing input_length", ErrSyntax)
	case w.OutputLength == nil:
		return Record{}, fmt.Errorf("%w: missing output_length", ErrSyntax)
	case len(w.HashIDs) == 0:
		return Record{}, fmt.Errorf("%w: missing or empty hash_ids", ErrSyntax)
	case *w.Timestamp < 0 || math.IsInf(*w.Timestamp, 0) || *w.Timestamp > 1e15:
		return Record{}, fmt.Errorf("%w: timestamp %g out of range", ErrSyntax, *w.Timestamp)
	case *w.InputLength < 1:
		return Record{}, fmt.Errorf("%w: input_length %d < 1", ErrSyntax, *w.InputLength)
	case *w.OutputLength < 1:
		return Record{}, fmt.Errorf("%w: output_length %d < 1", ErrSyntax, *w.OutputLength)
	case blockTokens > 0 && *w.InputLength > len(w.HashIDs)*blockTokens:
		return Record{}, fmt.Errorf("%w: input_length %d exceeds %d hash_ids × %d tokens",
			ErrSyntax, *w.InputLength, len(w.HashIDs), blockTokens)
	}
	if i := slices.IndexFunc(w.HashIDs, func(id int64) bool { return id < 0 }); i >= 0 {
		return Record{}, fmt.Errorf("%w: negative hash id %d at index %d", ErrSyntax, w.HashIDs[i], i)
	}
	return Record{
		TimestampMs:  *w.Timestamp,
		InputLength:  *w.InputLength,
		OutputLength: *w.OutputLength,
		HashIDs:      w.HashIDs,
	}, nil
}

// Read parses every record of r, stopping after limit records when limit is
// positive. Blank lines are skipped. Errors name the file and line. Records
// come back sorted by timestamp (stable, so equal timestamps keep file order).
func Read(r io.Reader, name string, blockTokens, limit int) ([]Record, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var recs []Record
	for lineNo := 1; limit <= 0 || len(recs) < limit; lineNo++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			rec, perr := ParseLine(line, blockTokens)
			if perr != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, lineNo, perr)
			}
			rec.Line = lineNo
			recs = append(recs, rec)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: read: %w", name, lineNo, err)
		}
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s: no trace records", name)
	}
	slices.SortStableFunc(recs, func(a, b Record) int {
		switch {
		case a.TimestampMs < b.TimestampMs:
			return -1
		case a.TimestampMs > b.TimestampMs:
			return 1
		}
		return 0
	})
	return recs, nil
}

// ReadFile is Read over a named file.
func ReadFile(path string, blockTokens, limit int) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	return Read(f, path, blockTokens, limit)
}
