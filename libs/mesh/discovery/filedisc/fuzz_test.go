package filedisc

import (
	"encoding/json"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/discovery"
)

// FuzzDecodeRecord: no file in the discovery directory panics the
// decoder; what it accepts is an instance that could have registered,
// and writing the record back and reading it again gives the same
// record.
func FuzzDecodeRecord(f *testing.F) {
	rec := record{
		Instance: discovery.Instance{ID: "decode-1", Role: discovery.RoleDecode, Model: "tiny", Version: "1.0.0", Address: "127.0.0.1:9100",
			Tags: []string{"canary"}, Meta: map[string]string{"kv_blocks": "512"}},
		PID: 4242, Host: "box", Expires: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Owner: "tok",
	}
	good, err := json.Marshal(rec)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	rec.Gone, rec.Critical = true, true
	tomb, _ := json.Marshal(rec)
	f.Add(tomb)
	f.Add([]byte(`{"id":"x","role":"router","address":"[::1]:80","expires":"2026-01-02T03:04:05+02:00"}`))
	f.Add([]byte(`{"id":"x","role":"router","address":"nohost"}`))
	f.Add([]byte(`{"id":"","role":"","address":""}`))
	f.Add([]byte(`{"expires":"not a time"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"id":"a","role":"decode","address":"h:1","tags":null,"meta":{}}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, ok := decodeRecord(data)
		if !ok {
			return
		}
		if err := rec.Validate(); err != nil {
			t.Fatalf("accepted a record whose instance could not register: %v", err)
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		again, ok := decodeRecord(b)
		if !ok {
			t.Fatalf("a decoded record, written back, is refused: %s", b)
		}
		if !discovery.Equal([]discovery.Instance{normal(again.Instance)}, []discovery.Instance{normal(rec.Instance)}) ||
			!again.Expires.Equal(rec.Expires) || again.PID != rec.PID || again.Host != rec.Host ||
			again.Critical != rec.Critical || again.Owner != rec.Owner || again.Gone != rec.Gone {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", rec, again)
		}
	})
}

// normal maps empty tags and meta to nil, as the record's omitempty
// encoding does.
func normal(in discovery.Instance) discovery.Instance {
	if len(in.Tags) == 0 {
		in.Tags = nil
	}
	if len(in.Meta) == 0 {
		in.Meta = nil
	}
	return in
}
