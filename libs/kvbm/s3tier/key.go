package s3tier

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Root is the prefix of every object the tier writes in a bucket; the
// version segment changes with the object format.
const Root = "switchyard-kv/v1/"

// Namespace is the namespace of a model's blocks: its name, path-escaped,
// so any model name makes one key segment.
func Namespace(model string) string { return url.PathEscape(model) }

// Model is the model a namespace names: Namespace's inverse.
func Model(namespace string) (string, error) { return url.PathUnescape(namespace) }

// Key names one block's object: its namespace, block geometry and chained
// hash.
type Key struct {
	Namespace  string
	BlockSize  int // tokens a block
	BlockBytes int // bytes of a block's data
	Hash       uint64
}

// Prefix is the key prefix of every block of k's namespace and geometry.
func (k Key) Prefix() string {
	return fmt.Sprintf("%s%s/%dt-%dB/", Root, k.Namespace, k.BlockSize, k.BlockBytes)
}

// String is the object key.
func (k Key) String() string { return k.Prefix() + strconv.FormatUint(k.Hash, 16) }

// ErrNotBlockKey is returned by ParseKey for a key no tier writes.
var ErrNotBlockKey = errors.New("s3tier: not a block key")

// ParseKey reads an object key written by the tier:
// Root<namespace>/<blockSize>t-<blockBytes>B/<hash in hex>. Anything else
// in the bucket (another application's objects, a newer format) is
// ErrNotBlockKey, so a catalog listing a shared bucket skips it.
func ParseKey(s string) (Key, error) {
	rest, ok := strings.CutPrefix(s, Root)
	if !ok {
		return Key{}, fmt.Errorf("%w: %q lacks the prefix %q", ErrNotBlockKey, s, Root)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || !validNamespace(parts[0]) {
		return Key{}, fmt.Errorf("%w: %q: want <namespace>/<size>t-<bytes>B/<hash>", ErrNotBlockKey, s)
	}
	geo, ok := strings.CutSuffix(parts[1], "B")
	if !ok {
		return Key{}, fmt.Errorf("%w: %q: geometry %q", ErrNotBlockKey, s, parts[1])
	}
	size, bytes, ok := strings.Cut(geo, "t-")
	bs, err1 := strconv.Atoi(size)
	bb, err2 := strconv.Atoi(bytes)
	if !ok || err1 != nil || err2 != nil || bs <= 0 || bb <= 0 || canonical(bs) != size || canonical(bb) != bytes {
		return Key{}, fmt.Errorf("%w: %q: geometry %q", ErrNotBlockKey, s, parts[1])
	}
	h, err := strconv.ParseUint(parts[2], 16, 64)
	if err != nil || strconv.FormatUint(h, 16) != parts[2] {
		return Key{}, fmt.Errorf("%w: %q: hash %q", ErrNotBlockKey, s, parts[2])
	}
	return Key{Namespace: parts[0], BlockSize: bs, BlockBytes: bb, Hash: h}, nil
}

// canonical is n as the tier writes it: a key that parses is the one key
// of its block, so two spellings never name the same block twice.
func canonical(n int) string { return strconv.Itoa(n) }

// validNamespace is what Config.validate admits.
func validNamespace(ns string) bool { return ns != "" && !strings.ContainsAny(ns, "/ ") }
