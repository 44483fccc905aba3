package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"time"
)

// Source is where a Guard's keys come from: the keys file and the admin
// keys file (either may be empty) and the entries of the environment.
type Source struct {
	KeysFile, KeysList   string
	AdminFile, AdminList string
}

// Load reads every entry of s.
func (s Source) Load() ([]Entry, error) {
	keys, err := LoadEntries(s.KeysFile, s.KeysList, false)
	if err != nil {
		return nil, err
	}
	admin, err := LoadEntries(s.AdminFile, s.AdminList, true)
	if err != nil {
		return nil, err
	}
	return append(keys, admin...), nil
}

// Watch reloads g from s whenever one of its files changes, polling every
// interval until ctx ends. A file that no longer parses (or went missing)
// keeps the keys in force and is logged; the next good version applies.
func (g *Guard) Watch(ctx context.Context, s Source, interval time.Duration, log *slog.Logger) {
	if s.KeysFile == "" && s.AdminFile == "" {
		return
	}
	// The first look reloads too: the files may have changed between the
	// Guard's start and this watch's.
	var last []byte
	t := time.NewTicker(interval)
	defer t.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		d := digest(s)
		if bytes.Equal(d, last) {
			continue
		}
		entries, err := s.Load()
		if err != nil {
			log.ErrorContext(ctx, "API keys changed but do not load; keeping the keys in force", "err", err)
			last = d // once per change, not every poll
			continue
		}
		g.Reload(entries)
		if !first {
			log.InfoContext(ctx, "API keys reloaded", "keys", len(entries))
		}
		last = d
	}
}

// digest is a hash of s's files' contents (a missing file hashes as
// empty), to tell a change without trusting modification times.
func digest(s Source) []byte {
	h := sha256.New()
	for _, p := range []string{s.KeysFile, s.AdminFile} {
		if p == "" {
			continue
		}
		b, _ := os.ReadFile(p)
		h.Write([]byte(p))
		h.Write([]byte{0})
		s := sha256.Sum256(b)
		h.Write(s[:])
	}
	return h.Sum(nil)
}
