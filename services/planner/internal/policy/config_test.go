package policy

import (
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"aggregated ignores prefill limits", func(c *Config) { c.Disaggregated = false; c.Prefill = Limits{5, 0} }, ""},
		{"scale to zero", func(c *Config) { c.Prefill.Min, c.Decode.Min = 0, 0 }, ""},
		{"TTFT", func(c *Config) { c.TTFT = 0 }, "TTFT 0s is not positive"},
		{"ITL", func(c *Config) { c.ITL = -time.Millisecond }, "ITL -1ms is not positive"},
		{"Interval", func(c *Config) { c.Interval = 0 }, "Interval 0s is not positive"},
		{"Prefill.Min", func(c *Config) { c.Prefill.Min = -1 }, "Prefill.Min -1 is negative"},
		{"Prefill.Max", func(c *Config) { c.Prefill.Max = 0 }, "Prefill.Max 0 is below 1"},
		{"Decode.Max below Min", func(c *Config) { c.Decode = Limits{4, 3} }, "Decode.Max 3 is below Decode.Min 4"},
		{"Budget negative", func(c *Config) { c.Budget = -1 }, "Budget -1 is negative"},
		{"Budget below mins", func(c *Config) { c.Prefill.Min, c.Decode.Min, c.Budget = 2, 2, 3 }, "Budget 3 is below the pools' Min replicas, 4 together"},
		{"MaxStepUp", func(c *Config) { c.MaxStepUp = 0 }, "MaxStepUp 0 is below 1"},
		{"DownStable", func(c *Config) { c.DownStable = 0 }, "DownStable 0 is below 1"},
		{"DownCooldown", func(c *Config) { c.DownCooldown = -time.Second }, "DownCooldown -1s is negative"},
		{"UpCooldown", func(c *Config) { c.UpCooldown = -time.Second }, "UpCooldown -1s is negative"},
		{"DownMargin", func(c *Config) { c.DownMargin = 2 }, "DownMargin 2 is outside [0, 1]"},
		{"Slack", func(c *Config) { c.Slack = -0.1 }, "Slack -0.1 is outside [0, 10]"},
		{"MinSamples", func(c *Config) { c.MinSamples = 0 }, "MinSamples 0 is below 1"},
		{"CorrectionWeight", func(c *Config) { c.CorrectionWeight = 0 }, "CorrectionWeight 0 is outside (0, 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || err.Error() != "policy config: "+tt.wantErr):
				t.Errorf("Validate() = %v, want %q", err, "policy config: "+tt.wantErr)
			}
		})
	}
}
