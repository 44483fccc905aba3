module switchyard.dev/libs/engine

go 1.26.0

require switchyard.dev/libs/kvhash v0.0.0

require (
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
)

replace switchyard.dev/libs/kvhash => ../kvhash
