// Package predict forecasts the next planning interval's value of a load
// signal (request rate, mean input or output length) from the values of
// the intervals so far. The planner sizes pools for the interval ahead, not
// the one behind, because a replica it asks for now serves only once it
// has started.
//
// Three predictors, built by name with New or from a flag with Parse:
//
//   - constant: the last observed value. No lag model at all; the baseline
//     the others must beat.
//   - holt-winters: additive Holt-Winters triple exponential smoothing —
//     a level, a trend and, with a season length, a seasonal offset per
//     position in the season. With season 0 it is Holt's linear trend
//     method.
//   - kalman: a local-linear-trend Kalman filter, whose gains come from
//     the ratio of process to measurement noise instead of hand-set
//     smoothing constants.
//
// The default (DefaultSpec) is holt-winters without a season. A trend term
// follows a ramp within a few intervals where the constant predictor lags
// it by one interval for ever, and without a season there is no period to
// configure, and so none to get wrong; a daily cycle is better served by
// setting season than by the default guessing one.
//
// Predictions are never negative (a rate or a length cannot be), and
// observations that are not finite numbers are ignored, so one missing
// sample cannot poison the state. Predictors are not safe for concurrent
// use; the planner owns one per signal.
package predict
