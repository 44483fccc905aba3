module switchyard.dev/libs/engine

go 1.26.8

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/aws-sdk-go-v2/credentials v1.21.1
	github.com/aws/aws-sdk-go-v2/service/s3 v1.114.10
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/viterin/vek v0.4.3
	golang.org/x/sys v0.48.0
	golang.org/x/text v0.42.0
	switchyard.dev/libs/kvhash v0.0.0
	switchyard.dev/libs/nixl v0.0.0
)

require (
	github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream v1.7.27 // indirect
	github.com/aws/aws-sdk-go-v2/config v1.33.19 // indirect
	github.com/aws/aws-sdk-go-v2/feature/ec2/imds v1.20.9 // indirect
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/v4a v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/accept-encoding v1.13.25 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/checksum v1.11.13 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/presigned-url v1.14.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/s3shared v1.20.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/signin v1.13.1 // indirect
	github.com/aws/aws-sdk-go-v2/service/sso v1.39.5 // indirect
	github.com/aws/aws-sdk-go-v2/service/ssooidc v1.44.5 // indirect
	github.com/aws/aws-sdk-go-v2/service/sts v1.52.0 // indirect
	github.com/aws/smithy-go v1.28.9 // indirect
)

require (
	github.com/chewxy/math32 v1.10.1 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/viterin/partial v1.1.0 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/exp v0.0.0-20260218203240-3dfff04db8fa // indirect
	switchyard.dev/libs/kvbm v0.0.0
	switchyard.dev/libs/kvtier v0.0.0
	switchyard.dev/libs/mesh v0.0.0
	switchyard.dev/libs/nixl/backend/obj v0.0.0 // indirect
	switchyard.dev/libs/sharedtest v0.0.0
)

replace switchyard.dev/libs/kvhash => ../kvhash

replace switchyard.dev/libs/nixl => ../nixl

replace switchyard.dev/libs/kvtier => ../kvtier

replace switchyard.dev/libs/sharedtest => ../sharedtest

replace switchyard.dev/libs/kvbm => ../kvbm

replace switchyard.dev/libs/mesh => ../mesh

replace switchyard.dev/libs/nixl/backend/obj => ../nixl/backend/obj
