module switchyard.dev/cmd/supervisor

go 1.26.8

require (
	connectrpc.com/connect v1.21.1
	google.golang.org/protobuf v1.36.12
	switchyard.dev/gen v0.0.0
)

replace switchyard.dev/gen => ../../gen

require switchyard.dev/libs/mesh v0.0.0

replace switchyard.dev/libs/mesh => ../../libs/mesh
