// Package presenters is the domain vocabulary shared by every agent integration and the
// service: the Presenter interface, session and message types, events
// and the Emitter that presenters publish them through, and sentinel errors.
//
// Nothing here knows gRPC or protobuf: service/ converts these types to the wire.
package presenters
