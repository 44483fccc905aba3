module switchyard.dev/tests

go 1.26.0
