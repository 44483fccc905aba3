package policy

import "testing"

func TestSplitBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		budget          int
		prefill, decode share
		wantP, wantD    int
	}{
		{"fits", 8, share{3, 1}, share{4, 1}, 3, 4},
		{"even", 6, share{8, 1}, share{8, 1}, 3, 3},
		{"tie goes to decode", 6, share{8, 1}, share{2, 1}, 4, 2},
		{"larger remainder wins", 10, share{9, 1}, share{5, 1}, 6, 4},
		{"prefill's larger remainder", 10, share{5, 1}, share{9, 1}, 4, 6},
		{"mins only", 2, share{5, 1}, share{5, 1}, 1, 1},
		{"min zero", 3, share{4, 0}, share{0, 0}, 3, 0},
		{"mins above budget share", 5, share{6, 2}, share{6, 2}, 2, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, d := splitBudget(tt.budget, tt.prefill, tt.decode)
			if p != tt.wantP || d != tt.wantD {
				t.Errorf("splitBudget(%d, %+v, %+v) = %d, %d; want %d, %d", tt.budget, tt.prefill, tt.decode, p, d, tt.wantP, tt.wantD)
			}
		})
	}
}
