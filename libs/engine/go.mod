module switchyard.dev/libs/engine

go 1.26.8

require (
	github.com/viterin/vek v0.4.3
	golang.org/x/sys v0.48.0
	switchyard.dev/libs/kvhash v0.0.0
	switchyard.dev/libs/nixl v0.0.0
)

require (
	github.com/chewxy/math32 v1.10.1 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/viterin/partial v1.1.0 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/exp v0.0.0-20230817173708-d852ddb80c63 // indirect
	switchyard.dev/libs/kvbm v0.0.0
	switchyard.dev/libs/kvtier v0.0.0
	switchyard.dev/libs/sharedtest v0.0.0
)

replace switchyard.dev/libs/kvhash => ../kvhash

replace switchyard.dev/libs/nixl => ../nixl

replace switchyard.dev/libs/kvtier => ../kvtier

replace switchyard.dev/libs/sharedtest => ../sharedtest

replace switchyard.dev/libs/kvbm => ../kvbm
