package predict

// Constant predicts the last observed value.
type Constant struct{ last float64 }

// Observe records v.
func (c *Constant) Observe(v float64) {
	if usable(v) {
		c.last = v
	}
}

// Predict is the last observed value, or 0.
func (c *Constant) Predict() float64 { return max(0, c.last) }
