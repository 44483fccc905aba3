package profile

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/stories260K.json from golden()")

const goldenFile = "testdata/stories260K.json"

func goldenWithTime() *Profile {
	p := golden()
	p.MeasuredAt = time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	return p
}

// TestGoldenFile pins the file format: Save writes exactly the golden
// file, and Load reads it back to the same profile.
func TestGoldenFile(t *testing.T) {
	t.Parallel()
	want := goldenWithTime()
	if *update {
		if err := want.Save(goldenFile); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := want.Encode()
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, file) {
		t.Errorf("Encode differs from %s (run with -update if the change is meant):\n%s", goldenFile, enc)
	}
	got, err := Load(goldenFile, "stories260K")
	if err != nil {
		t.Fatal(err)
	}
	if !equal(got, want) {
		t.Errorf("Load = %+v, want %+v", got, want)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	valid, err := goldenWithTime().Encode()
	if err != nil {
		t.Fatal(err)
	}
	replace := func(from, to string) string { return strings.Replace(string(valid), from, to, 1) }
	tests := []struct {
		name    string
		content *string // nil: no file
		model   string
		wantErr string
		is      error
	}{
		{"missing file", nil, "stories260K", "no such file or directory", fs.ErrNotExist},
		{"malformed JSON", ptr(`{"version": 1,` + "\n" + `  "model": }`), "", "malformed JSON at line 2, column 12", nil},
		{"not an object", ptr(`[1, 2]`), "", "malformed JSON", nil},
		{"no version", ptr(`{"model": "m"}`), "", "no version field", nil},
		{"unknown version", ptr(`{"version": 7, "whatever": true}`), "", "version 7 is not supported (this planner reads version 1)", nil},
		{"unknown field", ptr(replace(`"itl_seconds"`, `"itl_second"`)), "", `unknown field "itl_second"`, nil},
		{"wrong type", ptr(replace(`"block_size": 16`, `"block_size": "16"`)), "", "malformed profile at line 5", nil},
		{"trailing data", ptr(string(valid) + "{}"), "", "after top-level value", nil},
		{"another model", ptr(string(valid)), "llama", `is for model "stories260K", not "llama"`, nil},
		{"empty prefill", ptr(`{"version":1,"model":"m","block_size":16,"kv_blocks":8,"prefill":[],"decode":[]}`), "", "prefill has no points", nil},
		{"non-positive seconds", ptr(replace(`"seconds": 0.04`, `"seconds": 0`)), "", "prefill[1]: seconds 0 is not a positive number", nil},
		{"non-increasing input tokens", ptr(replace(`"input_tokens": 512`, `"input_tokens": 100`)), "", "prefill[1]: input_tokens 100 is not above the previous point's 128", nil},
		{"any model", ptr(string(valid)), "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "profile.json")
			if tt.content != nil {
				if err := os.WriteFile(path, []byte(*tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Load(path, tt.model)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Load = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Load = %v, want an error naming %s and containing %q", err, path, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Load = %v, want errors.Is %v", err, tt.is)
			}
		})
	}
}

func TestSave(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "p.json")
	first := goldenWithTime()
	if err := first.Save(path); err != nil {
		t.Fatal(err)
	}
	second := goldenWithTime()
	second.KVBlocks = 99
	if err := second.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path, "stories260K")
	if err != nil {
		t.Fatal(err)
	}
	if !equal(got, second) {
		t.Errorf("Load after Save = %+v, want %+v", got, second)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}

	invalid := goldenWithTime()
	invalid.Model = ""
	if err := invalid.Save(path); err == nil || !strings.Contains(err.Error(), "model is empty") {
		t.Errorf("Save(invalid) = %v, want the validation error", err)
	}
	if err := first.Save(filepath.Join(dir, "missing", "p.json")); err == nil {
		t.Error("Save into a missing directory succeeded")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %v, want only p.json (no temporary files left)", entries)
	}
	if got, err := Load(path, ""); err != nil || got.KVBlocks != 99 {
		t.Errorf("a failed Save changed the file: %+v, %v", got, err)
	}
}

// equal compares profiles, times by instant and offset (a decoded time's
// *Location differs from the one it was encoded from).
func equal(a, b *Profile) bool {
	_, oa := a.MeasuredAt.Zone()
	_, ob := b.MeasuredAt.Zone()
	if !a.MeasuredAt.Equal(b.MeasuredAt) || oa != ob {
		return false
	}
	x, y := *a, *b
	x.MeasuredAt, y.MeasuredAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(x, y)
}

func ptr(s string) *string { return &s }
