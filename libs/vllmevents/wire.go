package vllmevents

import (
	"encoding/binary"
	"fmt"
)

// EndSeq is the sequence number that ends a replay: -1 as a signed 64-bit
// big-endian integer, as vLLM sends it.
const EndSeq = ^uint64(0)

// ParseMessage splits a message as the PUB socket publishes it: the
// frames [topic, seq (8 bytes, big-endian), payload]. The returned slices
// alias frames.
func ParseMessage(frames [][]byte) (topic []byte, seq uint64, payload []byte, err error) {
	if len(frames) != 3 {
		return nil, 0, nil, fmt.Errorf("%w: message has %d frames, want 3", ErrMalformed, len(frames))
	}
	seq, err = parseSeq(frames[1])
	return frames[0], seq, frames[2], err
}

// parseReplay splits one reply of the replay socket, as a DEALER receives
// it. vLLM sends ["", seq, payload] (the empty delimiter frame first);
// some publishers add the topic: ["", topic, seq, payload]. Either way
// the last two frames are the sequence number and the payload; the end of
// the replay has seq EndSeq and an empty payload.
func parseReplay(frames [][]byte) (seq uint64, payload []byte, err error) {
	if len(frames) < 2 {
		return 0, nil, fmt.Errorf("%w: replay reply has %d frames", ErrMalformed, len(frames))
	}
	seq, err = parseSeq(frames[len(frames)-2])
	return seq, frames[len(frames)-1], err
}

func parseSeq(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: sequence frame has %d bytes, want 8", ErrMalformed, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// replayRequest is what a DEALER sends to ask for every batch from start
// on: an empty delimiter frame (what a REQ socket would add by itself,
// and what vLLM's ROUTER expects) and the 8-byte big-endian start.
func replayRequest(start uint64) [][]byte {
	return [][]byte{{}, binary.BigEndian.AppendUint64(nil, start)}
}
