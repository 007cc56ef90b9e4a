from agentic.v1 import errors_pb2 as _errors_pb2
from agentic.v1 import types_pb2 as _types_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

AGENTIC_EVENT_TYPE_AGENT_STATUS_CHANGED: AgenticEventType
AGENTIC_EVENT_TYPE_ELICITATION_REQUIRED: AgenticEventType
AGENTIC_EVENT_TYPE_ELICITATION_RESOLVED: AgenticEventType
AGENTIC_EVENT_TYPE_ERROR: AgenticEventType
AGENTIC_EVENT_TYPE_MESSAGE_BLOCK: AgenticEventType
AGENTIC_EVENT_TYPE_MESSAGE_DELTA: AgenticEventType
AGENTIC_EVENT_TYPE_MESSAGE_DEQUEUED: AgenticEventType
AGENTIC_EVENT_TYPE_MESSAGE_END: AgenticEventType
AGENTIC_EVENT_TYPE_MESSAGE_QUEUED: AgenticEventType
AGENTIC_EVENT_TYPE_MESSAGE_STEERED: AgenticEventType
AGENTIC_EVENT_TYPE_SESSION_CLOSED: AgenticEventType
AGENTIC_EVENT_TYPE_SESSION_CREATED: AgenticEventType
AGENTIC_EVENT_TYPE_SESSION_READY: AgenticEventType
AGENTIC_EVENT_TYPE_SESSION_UPDATED: AgenticEventType
AGENTIC_EVENT_TYPE_STATUS_CHANGED: AgenticEventType
AGENTIC_EVENT_TYPE_TOOL_END: AgenticEventType
AGENTIC_EVENT_TYPE_TOOL_PERMISSION_DENIED: AgenticEventType
AGENTIC_EVENT_TYPE_TOOL_PERMISSION_GRANTED: AgenticEventType
AGENTIC_EVENT_TYPE_TOOL_PERMISSION_REQUIRED: AgenticEventType
AGENTIC_EVENT_TYPE_TOOL_RUNNING: AgenticEventType
AGENTIC_EVENT_TYPE_TOOL_START: AgenticEventType
AGENTIC_EVENT_TYPE_UNSPECIFIED: AgenticEventType
DEQUEUE_REASON_CANCELLED: DequeueReason
DEQUEUE_REASON_FAILED: DequeueReason
DEQUEUE_REASON_STARTED: DequeueReason
DEQUEUE_REASON_UNSPECIFIED: DequeueReason
DESCRIPTOR: _descriptor.FileDescriptor
ELICITATION_DECIDER_AGENT: ElicitationDecider
ELICITATION_DECIDER_CANCELLED: ElicitationDecider
ELICITATION_DECIDER_UNSPECIFIED: ElicitationDecider
ELICITATION_DECIDER_USER: ElicitationDecider
PERMISSION_DECIDER_CANCELLED: PermissionDecider
PERMISSION_DECIDER_POLICY: PermissionDecider
PERMISSION_DECIDER_UNSPECIFIED: PermissionDecider
PERMISSION_DECIDER_USER: PermissionDecider

class AgentStatusChanged(_message.Message):
    __slots__ = ["agent"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: _types_pb2.AgentInfo
    def __init__(self, agent: _Optional[_Union[_types_pb2.AgentInfo, _Mapping]] = ...) -> None: ...

class AgenticEvent(_message.Message):
    __slots__ = ["agent_id", "agent_status_changed", "elicitation_required", "elicitation_resolved", "error", "event_time", "message_block", "message_delta", "message_dequeued", "message_end", "message_queued", "message_steered", "replay", "sequence", "session_closed", "session_created", "session_id", "session_ready", "session_updated", "status_changed", "tool_end", "tool_permission_denied", "tool_permission_granted", "tool_permission_required", "tool_running", "tool_start", "type"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_STATUS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    ELICITATION_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    ELICITATION_RESOLVED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_BLOCK_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_DELTA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_DEQUEUED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_END_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_QUEUED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_STEERED_FIELD_NUMBER: _ClassVar[int]
    REPLAY_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_CLOSED_FIELD_NUMBER: _ClassVar[int]
    SESSION_CREATED_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_READY_FIELD_NUMBER: _ClassVar[int]
    SESSION_UPDATED_FIELD_NUMBER: _ClassVar[int]
    STATUS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    TOOL_END_FIELD_NUMBER: _ClassVar[int]
    TOOL_PERMISSION_DENIED_FIELD_NUMBER: _ClassVar[int]
    TOOL_PERMISSION_GRANTED_FIELD_NUMBER: _ClassVar[int]
    TOOL_PERMISSION_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    TOOL_RUNNING_FIELD_NUMBER: _ClassVar[int]
    TOOL_START_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    agent_status_changed: AgentStatusChanged
    elicitation_required: ElicitationRequired
    elicitation_resolved: ElicitationResolved
    error: ErrorReported
    event_time: _timestamp_pb2.Timestamp
    message_block: MessageBlock
    message_delta: MessageDelta
    message_dequeued: MessageDequeued
    message_end: MessageEnd
    message_queued: MessageQueued
    message_steered: MessageSteered
    replay: bool
    sequence: int
    session_closed: SessionClosed
    session_created: SessionCreated
    session_id: str
    session_ready: SessionReady
    session_updated: SessionUpdated
    status_changed: StatusChanged
    tool_end: ToolEnd
    tool_permission_denied: ToolPermissionDenied
    tool_permission_granted: ToolPermissionGranted
    tool_permission_required: ToolPermissionRequired
    tool_running: ToolRunning
    tool_start: ToolStart
    type: AgenticEventType
    def __init__(self, sequence: _Optional[int] = ..., session_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., event_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., type: _Optional[_Union[AgenticEventType, str]] = ..., replay: bool = ..., session_created: _Optional[_Union[SessionCreated, _Mapping]] = ..., session_ready: _Optional[_Union[SessionReady, _Mapping]] = ..., session_updated: _Optional[_Union[SessionUpdated, _Mapping]] = ..., session_closed: _Optional[_Union[SessionClosed, _Mapping]] = ..., message_delta: _Optional[_Union[MessageDelta, _Mapping]] = ..., message_block: _Optional[_Union[MessageBlock, _Mapping]] = ..., message_end: _Optional[_Union[MessageEnd, _Mapping]] = ..., tool_start: _Optional[_Union[ToolStart, _Mapping]] = ..., tool_running: _Optional[_Union[ToolRunning, _Mapping]] = ..., tool_end: _Optional[_Union[ToolEnd, _Mapping]] = ..., tool_permission_required: _Optional[_Union[ToolPermissionRequired, _Mapping]] = ..., tool_permission_granted: _Optional[_Union[ToolPermissionGranted, _Mapping]] = ..., tool_permission_denied: _Optional[_Union[ToolPermissionDenied, _Mapping]] = ..., status_changed: _Optional[_Union[StatusChanged, _Mapping]] = ..., error: _Optional[_Union[ErrorReported, _Mapping]] = ..., agent_status_changed: _Optional[_Union[AgentStatusChanged, _Mapping]] = ..., elicitation_required: _Optional[_Union[ElicitationRequired, _Mapping]] = ..., elicitation_resolved: _Optional[_Union[ElicitationResolved, _Mapping]] = ..., message_queued: _Optional[_Union[MessageQueued, _Mapping]] = ..., message_dequeued: _Optional[_Union[MessageDequeued, _Mapping]] = ..., message_steered: _Optional[_Union[MessageSteered, _Mapping]] = ...) -> None: ...

class ElicitationRequired(_message.Message):
    __slots__ = ["request"]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _types_pb2.ElicitationRequest
    def __init__(self, request: _Optional[_Union[_types_pb2.ElicitationRequest, _Mapping]] = ...) -> None: ...

class ElicitationResolved(_message.Message):
    __slots__ = ["action", "content", "decided_by", "elicitation_id", "principal", "reason", "tool_id"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    ELICITATION_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    action: _types_pb2.ElicitationAction
    content: _struct_pb2.Struct
    decided_by: ElicitationDecider
    elicitation_id: str
    principal: str
    reason: str
    tool_id: str
    def __init__(self, elicitation_id: _Optional[str] = ..., tool_id: _Optional[str] = ..., action: _Optional[_Union[_types_pb2.ElicitationAction, str]] = ..., content: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., decided_by: _Optional[_Union[ElicitationDecider, str]] = ..., reason: _Optional[str] = ..., principal: _Optional[str] = ...) -> None: ...

class ErrorReported(_message.Message):
    __slots__ = ["message", "message_id", "reason", "retryable"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    message: str
    message_id: str
    reason: _errors_pb2.ErrorReason
    retryable: bool
    def __init__(self, reason: _Optional[_Union[_errors_pb2.ErrorReason, str]] = ..., message: _Optional[str] = ..., message_id: _Optional[str] = ..., retryable: bool = ...) -> None: ...

class MessageBlock(_message.Message):
    __slots__ = ["block", "message_id", "role"]
    BLOCK_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    block: _types_pb2.Block
    message_id: str
    role: _types_pb2.MessageRole
    def __init__(self, message_id: _Optional[str] = ..., block: _Optional[_Union[_types_pb2.Block, _Mapping]] = ..., role: _Optional[_Union[_types_pb2.MessageRole, str]] = ...) -> None: ...

class MessageDelta(_message.Message):
    __slots__ = ["message_id", "role", "text"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    role: _types_pb2.MessageRole
    text: str
    def __init__(self, message_id: _Optional[str] = ..., text: _Optional[str] = ..., role: _Optional[_Union[_types_pb2.MessageRole, str]] = ...) -> None: ...

class MessageDequeued(_message.Message):
    __slots__ = ["detail", "message_id", "reason", "user_message_id"]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    detail: str
    message_id: str
    reason: DequeueReason
    user_message_id: str
    def __init__(self, message_id: _Optional[str] = ..., user_message_id: _Optional[str] = ..., reason: _Optional[_Union[DequeueReason, str]] = ..., detail: _Optional[str] = ...) -> None: ...

class MessageEnd(_message.Message):
    __slots__ = ["message_id", "principal", "role", "stop_reason", "usage"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    principal: str
    role: _types_pb2.MessageRole
    stop_reason: _types_pb2.StopReason
    usage: _types_pb2.TokenUsage
    def __init__(self, message_id: _Optional[str] = ..., stop_reason: _Optional[_Union[_types_pb2.StopReason, str]] = ..., usage: _Optional[_Union[_types_pb2.TokenUsage, _Mapping]] = ..., role: _Optional[_Union[_types_pb2.MessageRole, str]] = ..., principal: _Optional[str] = ...) -> None: ...

class MessageQueued(_message.Message):
    __slots__ = ["message"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: _types_pb2.QueuedMessage
    def __init__(self, message: _Optional[_Union[_types_pb2.QueuedMessage, _Mapping]] = ...) -> None: ...

class MessageSteered(_message.Message):
    __slots__ = ["message_id", "user_message_id"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    user_message_id: str
    def __init__(self, message_id: _Optional[str] = ..., user_message_id: _Optional[str] = ...) -> None: ...

class SessionClosed(_message.Message):
    __slots__ = ["principal", "reason"]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    principal: str
    reason: str
    def __init__(self, reason: _Optional[str] = ..., principal: _Optional[str] = ...) -> None: ...

class SessionCreated(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionInfo
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionInfo, _Mapping]] = ...) -> None: ...

class SessionReady(_message.Message):
    __slots__ = ["message_count", "principal"]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    message_count: int
    principal: str
    def __init__(self, message_count: _Optional[int] = ..., principal: _Optional[str] = ...) -> None: ...

class SessionUpdated(_message.Message):
    __slots__ = ["session", "update_mask"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionInfo
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionInfo, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class StatusChanged(_message.Message):
    __slots__ = ["reason", "status"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    reason: str
    status: _types_pb2.SessionStatus
    def __init__(self, status: _Optional[_Union[_types_pb2.SessionStatus, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class ToolEnd(_message.Message):
    __slots__ = ["message_id", "tool"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    tool: _types_pb2.ToolCall
    def __init__(self, message_id: _Optional[str] = ..., tool: _Optional[_Union[_types_pb2.ToolCall, _Mapping]] = ...) -> None: ...

class ToolPermissionDenied(_message.Message):
    __slots__ = ["decided_by", "option_id", "permission_id", "principal", "reason", "tool_id"]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    OPTION_ID_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    decided_by: PermissionDecider
    option_id: str
    permission_id: str
    principal: str
    reason: str
    tool_id: str
    def __init__(self, permission_id: _Optional[str] = ..., tool_id: _Optional[str] = ..., option_id: _Optional[str] = ..., decided_by: _Optional[_Union[PermissionDecider, str]] = ..., reason: _Optional[str] = ..., principal: _Optional[str] = ...) -> None: ...

class ToolPermissionGranted(_message.Message):
    __slots__ = ["decided_by", "option_id", "permission_id", "principal", "reason", "tool_id"]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    OPTION_ID_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    decided_by: PermissionDecider
    option_id: str
    permission_id: str
    principal: str
    reason: str
    tool_id: str
    def __init__(self, permission_id: _Optional[str] = ..., tool_id: _Optional[str] = ..., option_id: _Optional[str] = ..., decided_by: _Optional[_Union[PermissionDecider, str]] = ..., reason: _Optional[str] = ..., principal: _Optional[str] = ...) -> None: ...

class ToolPermissionRequired(_message.Message):
    __slots__ = ["request"]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _types_pb2.PermissionRequest
    def __init__(self, request: _Optional[_Union[_types_pb2.PermissionRequest, _Mapping]] = ...) -> None: ...

class ToolRunning(_message.Message):
    __slots__ = ["message_id", "tool"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    tool: _types_pb2.ToolCall
    def __init__(self, message_id: _Optional[str] = ..., tool: _Optional[_Union[_types_pb2.ToolCall, _Mapping]] = ...) -> None: ...

class ToolStart(_message.Message):
    __slots__ = ["message_id", "tool"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    tool: _types_pb2.ToolCall
    def __init__(self, message_id: _Optional[str] = ..., tool: _Optional[_Union[_types_pb2.ToolCall, _Mapping]] = ...) -> None: ...

class AgenticEventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PermissionDecider(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ElicitationDecider(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class DequeueReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
