module switchyard.dev/libs/radix

go 1.26.0
