module switchyard.dev/libs/nixl

go 1.26.0
