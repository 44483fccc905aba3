package vllmevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// splitFrames reads frames from data as the fuzzers encode them: a count
// byte, then per frame a length byte and that many bytes (short data
// ends the last frame early), so any input is some list of frames.
func splitFrames(data []byte) [][]byte {
	if len(data) == 0 {
		return nil
	}
	n, data := int(data[0])%8, data[1:]
	frames := make([][]byte, 0, n)
	for range n {
		if len(data) == 0 {
			frames = append(frames, []byte{})
			continue
		}
		l := min(int(data[0]), len(data)-1)
		frames = append(frames, data[1:1+l])
		data = data[1+l:]
	}
	return frames
}

// joinFrames is splitFrames' inverse for frames of at most 255 bytes.
func joinFrames(frames ...[]byte) []byte {
	out := []byte{byte(len(frames))}
	for _, f := range frames {
		out = append(out, byte(len(f)))
		out = append(out, f...)
	}
	return out
}

func seqFrame(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// FuzzParseMessage: no list of frames panics ParseMessage; it accepts
// exactly [topic, 8-byte seq, payload], returning those frames and the
// big-endian seq (so a message built from its result parses the same);
// anything else is ErrMalformed.
func FuzzParseMessage(f *testing.F) {
	f.Add(joinFrames([]byte("kv"), seqFrame(42), []byte{0x93, 0xcb}))
	f.Add(joinFrames([]byte{}, seqFrame(EndSeq), []byte{}))
	f.Add(joinFrames([]byte("kv"), []byte{1, 2, 3}, []byte{}))
	f.Add(joinFrames([]byte("kv"), seqFrame(1)))
	f.Add(joinFrames([]byte{}, []byte{}, seqFrame(7), []byte("payload")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		frames := splitFrames(data)
		topic, seq, payload, err := ParseMessage(frames)
		wellFormed := len(frames) == 3 && len(frames[1]) == 8
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if wellFormed {
				t.Fatalf("refused a well-formed message %q: %v", frames, err)
			}
			return
		}
		if !wellFormed {
			t.Fatalf("accepted %d frames %q", len(frames), frames)
		}
		if !bytes.Equal(topic, frames[0]) || !bytes.Equal(payload, frames[2]) || seq != binary.BigEndian.Uint64(frames[1]) {
			t.Fatalf("ParseMessage(%q) = (%q, %d, %q)", frames, topic, seq, payload)
		}
		t2, s2, p2, err := ParseMessage([][]byte{topic, seqFrame(seq), payload})
		if err != nil || !bytes.Equal(t2, topic) || s2 != seq || !bytes.Equal(p2, payload) {
			t.Fatalf("round trip of (%q, %d, %q) = (%q, %d, %q, %v)", topic, seq, payload, t2, s2, p2, err)
		}
	})
}

// FuzzParseReplay: no reply panics parseReplay; it takes the last two
// frames as seq and payload, whatever comes before them (vLLM's empty
// delimiter, a topic), and refuses a reply without an 8-byte seq there.
func FuzzParseReplay(f *testing.F) {
	f.Add(joinFrames([]byte{}, seqFrame(3), []byte{0x90}))
	f.Add(joinFrames([]byte{}, []byte("kv"), seqFrame(3), []byte{0x90}))
	f.Add(joinFrames([]byte{}, seqFrame(EndSeq), []byte{}))
	f.Add(joinFrames([]byte{}))
	f.Fuzz(func(t *testing.T, data []byte) {
		frames := splitFrames(data)
		seq, payload, err := parseReplay(frames)
		wellFormed := len(frames) >= 2 && len(frames[len(frames)-2]) == 8
		if err != nil {
			if !errors.Is(err, ErrMalformed) || wellFormed {
				t.Fatalf("parseReplay(%q): %v", frames, err)
			}
			return
		}
		if !wellFormed || seq != binary.BigEndian.Uint64(frames[len(frames)-2]) || !bytes.Equal(payload, frames[len(frames)-1]) {
			t.Fatalf("parseReplay(%q) = (%d, %q)", frames, seq, payload)
		}
	})
}

// The fuzzers' frame encoding reads back what joinFrames wrote.
func TestSplitFrames(t *testing.T) {
	t.Parallel()
	want := [][]byte{[]byte("kv"), seqFrame(9), {}}
	got := splitFrames(joinFrames(want...))
	if len(got) != len(want) {
		t.Fatalf("%d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("frame %d = %q, want %q", i, got[i], want[i])
		}
	}
}
