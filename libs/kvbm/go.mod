module switchyard.dev/libs/kvbm

go 1.26.8

require (
	switchyard.dev/libs/kvtier v0.0.0
	switchyard.dev/libs/nixl v0.0.0
)

require golang.org/x/sys v0.48.0

replace (
	switchyard.dev/libs/kvtier => ../kvtier
	switchyard.dev/libs/nixl => ../nixl
)
