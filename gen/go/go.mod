// agenticd's API for Go programs, a module of its own so that importing it asks only
// for what the generated code needs, not for the Go version of agenticd's server module.
// go 1.23 is protobuf-go v1.36.12's: the runtime as new as the protoc-gen-go that
// generates this code (the code alone needs go1.20, for unsafe.StringData). grpc v1.64.0
// is the first with SupportPackageIsVersion9, which protoc-gen-go-grpc v1.6.2's code asserts.
module github.com/agenticd/agenticd/gen/go

go 1.23

require (
	google.golang.org/grpc v1.64.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.22.0 // indirect
	golang.org/x/sys v0.18.0 // indirect
	golang.org/x/text v0.14.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240318140521-94a12d6c2237 // indirect
)
