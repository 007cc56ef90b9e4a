from agentic.v1 import events_pb2 as _events_pb2
from agentic.v1 import types_pb2 as _types_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

AUDIT_KIND_COMMAND: AuditKind
AUDIT_KIND_ELICITATION_REQUESTED: AuditKind
AUDIT_KIND_ELICITATION_RESOLVED: AuditKind
AUDIT_KIND_FILE_WRITE: AuditKind
AUDIT_KIND_PERMISSION_DECIDED: AuditKind
AUDIT_KIND_PERMISSION_REQUESTED: AuditKind
AUDIT_KIND_POLICY_DENIAL: AuditKind
AUDIT_KIND_SESSION_CLOSED: AuditKind
AUDIT_KIND_SESSION_CREATED: AuditKind
AUDIT_KIND_SESSION_DELETED: AuditKind
AUDIT_KIND_SESSION_LOADED: AuditKind
AUDIT_KIND_UNSPECIFIED: AuditKind
AUDIT_KIND_WEBHOOK_DELIVERY: AuditKind
AUDIT_SOURCE_OBSERVED: AuditSource
AUDIT_SOURCE_REPORTED: AuditSource
AUDIT_SOURCE_UNSPECIFIED: AuditSource
DESCRIPTOR: _descriptor.FileDescriptor
WEBHOOK_OUTCOME_DELIVERED: WebhookOutcome
WEBHOOK_OUTCOME_DROPPED: WebhookOutcome
WEBHOOK_OUTCOME_FAILED: WebhookOutcome
WEBHOOK_OUTCOME_GAVE_UP: WebhookOutcome
WEBHOOK_OUTCOME_UNSPECIFIED: WebhookOutcome

class AuditCommand(_message.Message):
    __slots__ = ["command_line", "cwd", "denied", "duration", "exit_code", "status"]
    COMMAND_LINE_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    DENIED_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    command_line: str
    cwd: str
    denied: bool
    duration: _duration_pb2.Duration
    exit_code: int
    status: _types_pb2.ToolStatus
    def __init__(self, command_line: _Optional[str] = ..., cwd: _Optional[str] = ..., exit_code: _Optional[int] = ..., duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., status: _Optional[_Union[_types_pb2.ToolStatus, str]] = ..., denied: bool = ...) -> None: ...

class AuditDenial(_message.Message):
    __slots__ = ["permission_id", "reason"]
    PERMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    permission_id: str
    reason: str
    def __init__(self, permission_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class AuditElicitation(_message.Message):
    __slots__ = ["action", "answered_fields", "client_address", "client_identity", "decided_by", "elicitation_id", "message", "mode", "reason", "url"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    ELICITATION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    action: _types_pb2.ElicitationAction
    answered_fields: _containers.RepeatedScalarFieldContainer[str]
    client_address: str
    client_identity: str
    decided_by: _events_pb2.ElicitationDecider
    elicitation_id: str
    message: str
    mode: _types_pb2.ElicitationMode
    reason: str
    url: str
    def __init__(self, elicitation_id: _Optional[str] = ..., message: _Optional[str] = ..., mode: _Optional[_Union[_types_pb2.ElicitationMode, str]] = ..., url: _Optional[str] = ..., action: _Optional[_Union[_types_pb2.ElicitationAction, str]] = ..., decided_by: _Optional[_Union[_events_pb2.ElicitationDecider, str]] = ..., reason: _Optional[str] = ..., answered_fields: _Optional[_Iterable[str]] = ..., client_address: _Optional[str] = ..., client_identity: _Optional[str] = ...) -> None: ...

class AuditEvent(_message.Message):
    __slots__ = ["agent_id", "command", "denial", "elicitation", "event_sequence", "event_time", "file_write", "id", "kind", "permission", "principal", "session", "session_id", "source", "time", "tool_id", "webhook"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    DENIAL_FIELD_NUMBER: _ClassVar[int]
    ELICITATION_FIELD_NUMBER: _ClassVar[int]
    EVENT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    FILE_WRITE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    command: AuditCommand
    denial: AuditDenial
    elicitation: AuditElicitation
    event_sequence: int
    event_time: _timestamp_pb2.Timestamp
    file_write: AuditFileWrite
    id: int
    kind: AuditKind
    permission: AuditPermission
    principal: str
    session: AuditSession
    session_id: str
    source: AuditSource
    time: _timestamp_pb2.Timestamp
    tool_id: str
    webhook: AuditWebhook
    def __init__(self, id: _Optional[int] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., event_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[_Union[AuditKind, str]] = ..., source: _Optional[_Union[AuditSource, str]] = ..., session_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., tool_id: _Optional[str] = ..., event_sequence: _Optional[int] = ..., principal: _Optional[str] = ..., session: _Optional[_Union[AuditSession, _Mapping]] = ..., file_write: _Optional[_Union[AuditFileWrite, _Mapping]] = ..., command: _Optional[_Union[AuditCommand, _Mapping]] = ..., permission: _Optional[_Union[AuditPermission, _Mapping]] = ..., denial: _Optional[_Union[AuditDenial, _Mapping]] = ..., elicitation: _Optional[_Union[AuditElicitation, _Mapping]] = ..., webhook: _Optional[_Union[AuditWebhook, _Mapping]] = ...) -> None: ...

class AuditFileWrite(_message.Message):
    __slots__ = ["bytes", "deleted", "path", "sha256", "tool_title"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    TOOL_TITLE_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    deleted: bool
    path: str
    sha256: str
    tool_title: str
    def __init__(self, path: _Optional[str] = ..., bytes: _Optional[int] = ..., sha256: _Optional[str] = ..., deleted: bool = ..., tool_title: _Optional[str] = ...) -> None: ...

class AuditPermission(_message.Message):
    __slots__ = ["client_address", "client_identity", "command_line", "decided_by", "description", "granted", "option_id", "paths", "permission_id", "permission_type", "reason"]
    CLIENT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    COMMAND_LINE_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    OPTION_ID_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    client_address: str
    client_identity: str
    command_line: str
    decided_by: _events_pb2.PermissionDecider
    description: str
    granted: bool
    option_id: str
    paths: _containers.RepeatedScalarFieldContainer[str]
    permission_id: str
    permission_type: _types_pb2.PermissionType
    reason: str
    def __init__(self, permission_id: _Optional[str] = ..., description: _Optional[str] = ..., permission_type: _Optional[_Union[_types_pb2.PermissionType, str]] = ..., paths: _Optional[_Iterable[str]] = ..., command_line: _Optional[str] = ..., option_id: _Optional[str] = ..., granted: bool = ..., decided_by: _Optional[_Union[_events_pb2.PermissionDecider, str]] = ..., reason: _Optional[str] = ..., client_address: _Optional[str] = ..., client_identity: _Optional[str] = ...) -> None: ...

class AuditSession(_message.Message):
    __slots__ = ["reason", "workspace"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    workspace: str
    def __init__(self, workspace: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class AuditWebhook(_message.Message):
    __slots__ = ["attempt", "delivery_id", "dropped", "error", "event", "hook", "host", "http_status", "outcome"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    HOOK_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    delivery_id: str
    dropped: int
    error: str
    event: _types_pb2.WebhookEvent
    hook: str
    host: str
    http_status: int
    outcome: WebhookOutcome
    def __init__(self, delivery_id: _Optional[str] = ..., hook: _Optional[str] = ..., host: _Optional[str] = ..., event: _Optional[_Union[_types_pb2.WebhookEvent, str]] = ..., outcome: _Optional[_Union[WebhookOutcome, str]] = ..., attempt: _Optional[int] = ..., http_status: _Optional[int] = ..., error: _Optional[str] = ..., dropped: _Optional[int] = ...) -> None: ...

class AuditKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class AuditSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class WebhookOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
