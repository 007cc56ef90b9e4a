// The standard gRPC health service (grpc.health.v1.Health/Check), described here by
// hand: it is two messages and one method, and no npm package ships it for
// protobuf-es. The field numbers and names are those of grpc/health/v1/health.proto,
// which is what makes the call interoperable with any gRPC server's health service.
import { create, createFileRegistry } from "@bufbuild/protobuf";
import type { Message } from "@bufbuild/protobuf";
import type { GenMessage, GenService } from "@bufbuild/protobuf/codegenv2";
import {
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FileDescriptorProtoSchema,
} from "@bufbuild/protobuf/wkt";

export type HealthCheckRequest = Message<"grpc.health.v1.HealthCheckRequest"> & {
  service: string;
};

export type HealthCheckResponse = Message<"grpc.health.v1.HealthCheckResponse"> & {
  status: HealthCheckResponse_ServingStatus;
};

export enum HealthCheckResponse_ServingStatus {
  UNKNOWN = 0,
  SERVING = 1,
  NOT_SERVING = 2,
  SERVICE_UNKNOWN = 3,
}

const healthFile = create(FileDescriptorProtoSchema, {
  name: "grpc/health/v1/health.proto",
  package: "grpc.health.v1",
  syntax: "proto3",
  messageType: [
    {
      name: "HealthCheckRequest",
      field: [
        {
          name: "service",
          jsonName: "service",
          number: 1,
          label: FieldDescriptorProto_Label.OPTIONAL,
          type: FieldDescriptorProto_Type.STRING,
        },
      ],
    },
    {
      name: "HealthCheckResponse",
      field: [
        {
          name: "status",
          jsonName: "status",
          number: 1,
          label: FieldDescriptorProto_Label.OPTIONAL,
          type: FieldDescriptorProto_Type.ENUM,
          typeName: ".grpc.health.v1.HealthCheckResponse.ServingStatus",
        },
      ],
      enumType: [
        {
          name: "ServingStatus",
          value: Object.entries(HealthCheckResponse_ServingStatus)
            .filter((entry): entry is [string, number] => typeof entry[1] === "number")
            .map(([name, number]) => ({ name, number })),
        },
      ],
    },
  ],
  service: [
    {
      name: "Health",
      method: [
        {
          name: "Check",
          inputType: ".grpc.health.v1.HealthCheckRequest",
          outputType: ".grpc.health.v1.HealthCheckResponse",
        },
      ],
    },
  ],
});

const registry = createFileRegistry(healthFile, () => undefined);

function mustGetService(typeName: string) {
  const service = registry.getService(typeName);
  if (service === undefined) {
    throw new Error(`health descriptor does not define ${typeName}`);
  }
  return service;
}

export const Health = mustGetService("grpc.health.v1.Health") as GenService<{
  check: {
    methodKind: "unary";
    input: GenMessage<HealthCheckRequest>;
    output: GenMessage<HealthCheckResponse>;
  };
}>;
