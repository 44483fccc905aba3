module switchyard.dev/libs/mooncake

go 1.26.8

require switchyard.dev/libs/sharedtest v0.0.0

replace switchyard.dev/libs/sharedtest => ../sharedtest
