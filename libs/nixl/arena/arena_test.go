package arena

import "testing"

func TestMap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		size int
		ok   bool
	}{
		{"page", 4096, true},
		{"odd", 12345, true},
		{"zero", 0, false},
		{"negative", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := Map(tc.size)
			if (err == nil) != tc.ok {
				t.Fatalf("Map(%d) err = %v, want ok=%v", tc.size, err, tc.ok)
			}
			if err != nil {
				return
			}
			b := a.Bytes()
			if len(b) != tc.size || b[0] != 0 || b[len(b)-1] != 0 {
				t.Fatalf("mapping len %d, want %d zeroed", len(b), tc.size)
			}
			b[len(b)-1] = 7
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
		})
	}
}
