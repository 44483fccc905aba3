module switchyard.dev/libs/worker

go 1.26.0
