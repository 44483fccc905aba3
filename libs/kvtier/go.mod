module switchyard.dev/libs/kvtier

go 1.26.8
