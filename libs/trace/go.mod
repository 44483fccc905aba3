module switchyard.dev/libs/trace

go 1.26.0
