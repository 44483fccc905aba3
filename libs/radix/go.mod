module switchyard.dev/libs/radix

go 1.26.8

require switchyard.dev/libs/kvtier v0.0.0

replace switchyard.dev/libs/kvhash => ../kvhash

replace switchyard.dev/libs/kvtier => ../kvtier
