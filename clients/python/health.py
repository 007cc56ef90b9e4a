"""The standard gRPC health service (grpc.health.v1.Health/Check), described by hand.

Debian's python3-grpcio does not ship grpc_health, and generating it would put a
`grpc` package under gen/python that the real grpc package hides. It is two messages
and one method; the names and field numbers are those of grpc/health/v1/health.proto,
which is what makes the call work against any gRPC server's health service.
"""

import argparse

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_Field = descriptor_pb2.FieldDescriptorProto


def _health_file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="grpc/health/v1/health.proto", package="grpc.health.v1", syntax="proto3"
    )
    request = file.message_type.add(name="HealthCheckRequest")
    request.field.add(
        name="service", json_name="service", number=1,
        label=_Field.LABEL_OPTIONAL, type=_Field.TYPE_STRING,
    )
    response = file.message_type.add(name="HealthCheckResponse")
    status = response.enum_type.add(name="ServingStatus")
    for number, name in enumerate(("UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN")):
        status.value.add(name=name, number=number)
    response.field.add(
        name="status", json_name="status", number=1,
        label=_Field.LABEL_OPTIONAL, type=_Field.TYPE_ENUM,
        type_name=".grpc.health.v1.HealthCheckResponse.ServingStatus",
    )
    return file


# A private pool, so that a grpc_health package loaded by the same program cannot clash.
_pool = descriptor_pool.DescriptorPool()
_pool.Add(_health_file())


def _message_class(full_name: str):
    descriptor = _pool.FindMessageTypeByName(full_name)
    get_class = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.22
    if get_class is not None:
        return get_class(descriptor)
    return message_factory.MessageFactory(_pool).GetPrototype(descriptor)


HealthCheckRequest = _message_class("grpc.health.v1.HealthCheckRequest")
HealthCheckResponse = _message_class("grpc.health.v1.HealthCheckResponse")
SERVING = HealthCheckResponse.DESCRIPTOR.enum_types_by_name["ServingStatus"].values_by_name["SERVING"].number


class HealthStub:
    """Client for grpc.health.v1.Health."""

    def __init__(self, channel):
        self.Check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=HealthCheckRequest.SerializeToString,
            response_deserializer=HealthCheckResponse.FromString,
        )


def status_name(status: int) -> str:
    return HealthCheckResponse.DESCRIPTOR.enum_types_by_name["ServingStatus"].values_by_number[status].name


def main() -> int:
    """`health.py --addr HOST:PORT`: exit 0 when the server reports SERVING, 1 otherwise."""
    parser = argparse.ArgumentParser(description="One gRPC health check.")
    parser.add_argument("--addr", required=True)
    parser.add_argument("--service", default="")
    parser.add_argument("--timeout", type=float, default=1.0, help="seconds")
    opts = parser.parse_args()
    with grpc.insecure_channel(opts.addr) as channel:
        try:
            res = HealthStub(channel).Check(HealthCheckRequest(service=opts.service), timeout=opts.timeout)
        except grpc.RpcError as err:
            print(f"health: {err.code().name}: {err.details()}")
            return 1
    print(f"health: {status_name(res.status)}")
    return 0 if res.status == SERVING else 1


if __name__ == "__main__":
    raise SystemExit(main())
