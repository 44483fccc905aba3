module switchyard.dev/libs/sharedtest

go 1.26.8
