module switchyard.dev/libs/radix

go 1.26.0

require switchyard.dev/libs/kvhash v0.0.0

replace switchyard.dev/libs/kvhash => ../kvhash
