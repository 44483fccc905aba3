package profile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Decode parses and validates a profile. It reads the version first, so a
// file of another version is refused as such rather than for a field this
// version does not know; then it decodes strictly (unknown fields are
// errors, as is anything after the object) and validates.
func Decode(data []byte) (*Profile, error) {
	var head struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("malformed JSON%s: %w", where(data, err), err)
	}
	if head.Version == nil {
		return nil, errors.New("no version field (not a profile?)")
	}
	if *head.Version != Version {
		return nil, fmt.Errorf("version %d is not supported (this planner reads version %d)", *head.Version, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("malformed profile%s: %w", where(data, err), err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Encode validates p and returns it as indented JSON with a trailing
// newline, the form Save writes.
func (p *Profile) Encode() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode profile: %w", err)
	}
	return append(b, '\n'), nil
}

// Load reads the profile at path and checks that it is for model; an
// empty model accepts a profile for any model. Errors name the file.
func Load(path, model string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in our own message
		}
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	p, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	if model != "" && p.Model != model {
		return nil, fmt.Errorf("profile %s is for model %q, not %q", path, p.Model, model)
	}
	return p, nil
}

// Save writes p to path atomically: to a temporary file in the same
// directory, synced, then renamed over path, so a planner reading the
// profile while `planner profile` rewrites it sees the old or the new one,
// never half of one.
func (p *Profile) Save(path string) (err error) {
	data, err := p.Encode()
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	// Readable like any file the user wrote (CreateTemp makes it 0600).
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("profile %s: write: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("profile %s: sync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("profile %s: close: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	return nil
}

// where returns " at line L, column C" for JSON errors that carry an
// offset, so a hand-edited file's mistake can be found.
func where(data []byte, err error) string {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset - 1 // the offending byte, not the one after it
	case errors.As(err, &te):
		off = te.Offset // the end of the mistyped value
	default:
		return ""
	}
	off = min(max(off, 0), int64(len(data)))
	line, col := 1, 1
	for _, c := range data[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf(" at line %d, column %d", line, col)
}
