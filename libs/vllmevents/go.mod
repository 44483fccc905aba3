module switchyard.dev/libs/vllmevents

go 1.26.8

require (
	github.com/go-zeromq/zmq4 v0.17.0
	github.com/vmihailenco/msgpack/v5 v5.4.1
)

require (
	github.com/go-zeromq/goczmq/v4 v4.2.2 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	switchyard.dev/libs/kvtier v0.0.0
)

replace switchyard.dev/libs/kvhash => ../kvhash

replace switchyard.dev/libs/kvtier => ../kvtier

require switchyard.dev/libs/mesh v0.0.0

replace switchyard.dev/libs/mesh => ../mesh

replace switchyard.dev/gen => ../../gen
