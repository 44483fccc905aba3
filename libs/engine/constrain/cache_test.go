package constrain

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

func TestCache(t *testing.T) {
	t.Parallel()
	c := NewCache(2)
	a := []byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	aSpaced := []byte(" {\"type\": \"object\",\n \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}")
	b := []byte(`{"type":"string"}`)
	bad := []byte(`{"type":"string","pattern":"x"}`)
	ga, err := c.Schema(a)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := c.Schema(aSpaced); g != ga {
		t.Error("the same schema with other whitespace compiled again")
	}
	if _, err := c.Schema(b); err != nil {
		t.Fatal(err)
	}
	if g, _ := c.Schema(a); g != ga { // a is the most recent now; b next
		t.Error("a was evicted while under the limit")
	}
	var se *SchemaError
	if _, err := c.Schema(bad); !errors.As(err, &se) || se.Keyword != "pattern" {
		t.Fatalf("bad schema: %v", err)
	}
	if c.Len() != 2 {
		t.Fatalf("Len %d, want 2", c.Len())
	}
	if g, _ := c.Schema(a); g != ga {
		t.Error("a (recently used) was evicted instead of b")
	}
	if _, err := c.Schema(b); err != nil { // evicts bad
		t.Fatal(err)
	}
	if _, err := c.Schema(bad); err == nil { // compiled again, evicts a
		t.Fatal("bad schema compiled")
	}
	if g, _ := c.Schema(a); g == ga {
		t.Error("a survived two newer schemas in a cache of two")
	}
}

// TestConcurrentUse shares a cache, grammars and a vocabulary between
// goroutines, each with its own matchers (run it with -race).
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	c := NewCache(4)
	v := syntheticVocab(2000, 4)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			schema := walkSchemas[w%4].schema
			g, err := c.Schema([]byte(schema))
			if err != nil {
				errs <- err
				return
			}
			ref := reference(t, schema)
			for seed := range 3 {
				out, done := walk(t, g.Matcher(v), v, 200, rand.New(rand.NewPCG(uint64(w), uint64(seed))))
				if !done {
					errs <- fmt.Errorf("incomplete %q", out)
					return
				}
				if err := conforms(ref, out); err != nil {
					errs <- fmt.Errorf("%q: %w", out, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
