package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The scanner reads a reply the same however the deltas split it, and a
// complete reply that is valid JSON the same as encoding/json does.
func FuzzCallScanner(f *testing.F) {
	f.Add(`{"name":"now","arguments":{}}`, 3, false)
	f.Add(` [ {"name" : "a", "arguments" : {"x": "}\"]"}} , {"arguments": 1.5e3, "name": "b"} ] `, 5, true)
	f.Add(`{"name":"n\u0061me","arguments":"{"}`, 1, false)
	f.Add(`{"name":"a","arguments":[1,{"b":[]}]}{`, 2, false)
	f.Fuzz(func(t *testing.T, text string, split int, parallel bool) {
		whole := newCallScanner(parallel)
		whole.feed(text)
		parts := newCallScanner(parallel)
		step := 1 + (split%8+8)%8
		for i := 0; i < len(text); i += step {
			parts.feed(text[i:min(i+step, len(text))])
		}
		if whole.st != parts.st || !sameCalls(whole.named(), parts.named()) {
			t.Fatalf("split by %d: state %d vs %d, calls %+v vs %+v", step, parts.st, whole.st, parts.named(), whole.named())
		}
		if !whole.done() || !json.Valid([]byte(text)) {
			return
		}
		type callJSON struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		var calls []callJSON
		dec := json.NewDecoder(bytes.NewReader([]byte(text)))
		dec.DisallowUnknownFields()
		var err error
		if parallel {
			err = dec.Decode(&calls)
		} else {
			calls = make([]callJSON, 1)
			err = dec.Decode(&calls[0])
		}
		if err != nil {
			t.Fatalf("scanned as complete, but encoding/json says %v", err)
		}
		named := whole.named()
		if len(named) != len(calls) {
			t.Fatalf("%d calls scanned, %d decoded", len(named), len(calls))
		}
		for i, c := range calls {
			if named[i].name != c.Name || string(named[i].args) != string(c.Arguments) {
				t.Fatalf("call %d: scanned %q(%s), decoded %q(%s)", i, named[i].name, named[i].args, c.Name, c.Arguments)
			}
		}
	})
}

func sameCalls(a, b []*scannedCall) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || !bytes.Equal(a[i].args, b[i].args) || a[i].argsDone != b[i].argsDone {
			return false
		}
	}
	return true
}
