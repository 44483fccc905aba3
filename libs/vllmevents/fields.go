package vllmevents

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"switchyard.dev/libs/kvtier"
)

// field decodes the value of the named event field into e. Fields are
// collected in e.Stored whatever the kind (a map may name its type last);
// finish moves them where they belong.
func (d *Decoder) field(e *Event, name string) error {
	s := &e.Stored
	var err error
	switch name {
	case "block_hashes":
		s.Hashes, err = d.hashList()
	case "parent_block_hash":
		if !d.r.nil() {
			s.Parent, err = d.hash()
			s.HasParent = err == nil
		}
	case "token_ids":
		s.TokenIDs, err = d.tokenList()
	case "block_size":
		var v uint64
		var neg bool
		v, neg, err = d.r.int()
		if err == nil && (neg || v > math.MaxInt32) {
			err = d.r.fail("block_size out of range")
		}
		s.BlockSize = int(v)
	case "lora_id":
		if !d.r.nil() {
			var v uint64
			v, _, err = d.r.int()
			s.LoraID, s.HasLoraID = int64(v), err == nil
		}
	case "medium":
		if !d.r.nil() {
			var m []byte
			m, err = d.r.bytes()
			s.Tier = tierOf(m)
		}
	case "lora_name":
		if !d.r.nil() {
			var n []byte
			n, err = d.r.bytes()
			s.LoraName = d.intern(n)
		}
	case "extra_keys":
		if !d.r.nil() {
			s.HasExtraKeys, err = d.extraKeys()
		}
	default:
		err = d.r.skip(0)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// extraKeys consumes an extra_keys list (one entry per block, nil for a
// block without any) and reports whether any entry is set.
func (d *Decoder) extraKeys() (bool, error) {
	n, err := d.r.array()
	if err != nil {
		return false, err
	}
	set := false
	for range n {
		if d.r.nil() {
			continue
		}
		set = true
		if err := d.r.skip(0); err != nil {
			return false, err
		}
	}
	return set, nil
}

// finish turns the fields collected in e.Stored into e's final shape.
func (d *Decoder) finish(e *Event) {
	switch e.Kind {
	case KindRemoved:
		e.Removed = Removed{Hashes: e.Stored.Hashes, Tier: e.Stored.Tier}
		e.Stored = Stored{}
	case KindCleared:
		e.Stored = Stored{}
	}
}

// hash decodes one block hash (see Decoder for the accepted forms).
func (d *Decoder) hash() (uint64, error) {
	c, err := d.r.peek()
	if err != nil {
		return 0, err
	}
	if (c >= 0xa0 && c <= 0xbf) || c == 0xd9 || c == 0xda || c == 0xdb || c == 0xc4 || c == 0xc5 || c == 0xc6 {
		b, err := d.r.bytes()
		if err != nil {
			return 0, err
		}
		if len(b) == 0 {
			return 0, d.r.fail("empty hash digest")
		}
		if len(b) >= 8 {
			return binary.BigEndian.Uint64(b[len(b)-8:]), nil
		}
		var v uint64
		for _, x := range b {
			v = v<<8 | uint64(x)
		}
		return v, nil
	}
	v, _, err := d.r.int()
	return v, err
}

// hashList decodes an array of hashes into the decoder's arena.
func (d *Decoder) hashList() ([]uint64, error) {
	n, err := d.r.array()
	if err != nil {
		return nil, err
	}
	start := len(d.hashes)
	for range n {
		h, err := d.hash()
		if err != nil {
			return nil, err
		}
		d.hashes = append(d.hashes, h)
	}
	return d.hashes[start:len(d.hashes):len(d.hashes)], nil
}

// tokenList decodes an array of token ids into the decoder's arena.
func (d *Decoder) tokenList() ([]uint32, error) {
	n, err := d.r.array()
	if err != nil {
		return nil, err
	}
	start := len(d.tokens)
	for range n {
		v, neg, err := d.r.int()
		if err != nil {
			return nil, err
		}
		if neg || v > math.MaxUint32 {
			return nil, d.r.fail("token id out of range")
		}
		d.tokens = append(d.tokens, uint32(v))
	}
	return d.tokens[start:len(d.tokens):len(d.tokens)], nil
}

// tierOf maps a vLLM medium name to a tier, ignoring ASCII case.
func tierOf(m []byte) kvtier.Tier {
	for _, n := range [...]string{"GPU", "CUDA", "DEVICE", "HBM"} {
		if bytes.EqualFold(m, []byte(n)) {
			return kvtier.Device
		}
	}
	for _, n := range [...]string{"CPU", "HOST", "DRAM"} {
		if bytes.EqualFold(m, []byte(n)) {
			return kvtier.Host
		}
	}
	for _, n := range [...]string{"DISK", "SSD", "NVME"} {
		if bytes.EqualFold(m, []byte(n)) {
			return kvtier.Disk
		}
	}
	return kvtier.External
}

// intern returns b as a string, reusing earlier strings so that repeated
// LoRA names cost no allocation.
func (d *Decoder) intern(b []byte) string {
	if s, ok := d.loras[string(b)]; ok {
		return s
	}
	s := string(b)
	if d.loras == nil {
		d.loras = map[string]string{}
	}
	if len(d.loras) < maxLoraNames {
		d.loras[s] = s
	}
	return s
}
