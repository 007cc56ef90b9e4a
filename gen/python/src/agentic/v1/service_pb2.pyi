from agentic.v1 import audit_pb2 as _audit_pb2
from agentic.v1 import events_pb2 as _events_pb2
from agentic.v1 import types_pb2 as _types_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DELIVERY_MODE_INTERRUPT: DeliveryMode
DELIVERY_MODE_QUEUE: DeliveryMode
DELIVERY_MODE_STEER: DeliveryMode
DELIVERY_MODE_UNSPECIFIED: DeliveryMode
DELIVERY_OUTCOME_QUEUED: DeliveryOutcome
DELIVERY_OUTCOME_STARTED: DeliveryOutcome
DELIVERY_OUTCOME_STEERED: DeliveryOutcome
DELIVERY_OUTCOME_UNSPECIFIED: DeliveryOutcome
DESCRIPTOR: _descriptor.FileDescriptor
MESSAGE_ORDER_NEWEST_FIRST: MessageOrder
MESSAGE_ORDER_OLDEST_FIRST: MessageOrder
MESSAGE_ORDER_UNSPECIFIED: MessageOrder
SESSION_VIEW_BASIC: SessionView
SESSION_VIEW_FULL: SessionView
SESSION_VIEW_UNSPECIFIED: SessionView

class Bookmark(_message.Message):
    __slots__ = ["sequence"]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    def __init__(self, sequence: _Optional[int] = ...) -> None: ...

class Caller(_message.Message):
    __slots__ = ["groups", "principal", "scopes", "via"]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    VIA_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedScalarFieldContainer[str]
    principal: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    via: str
    def __init__(self, principal: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., groups: _Optional[_Iterable[str]] = ..., via: _Optional[str] = ...) -> None: ...

class CancelMessageRequest(_message.Message):
    __slots__ = ["message_id", "request_id", "session_id"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    request_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., message_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class CancelMessageResponse(_message.Message):
    __slots__ = ["message_id"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    def __init__(self, message_id: _Optional[str] = ...) -> None: ...

class CaughtUp(_message.Message):
    __slots__ = ["sequence"]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    def __init__(self, sequence: _Optional[int] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ["acl", "agent_id", "config", "request_id"]
    ACL_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    acl: _containers.RepeatedCompositeFieldContainer[_types_pb2.SessionGrant]
    agent_id: str
    config: SessionConfig
    request_id: str
    def __init__(self, agent_id: _Optional[str] = ..., config: _Optional[_Union[SessionConfig, _Mapping]] = ..., request_id: _Optional[str] = ..., acl: _Optional[_Iterable[_Union[_types_pb2.SessionGrant, _Mapping]]] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionInfo
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionInfo, _Mapping]] = ...) -> None: ...

class CreateWebLoginRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CreateWebLoginResponse(_message.Message):
    __slots__ = ["expire_time", "path", "url"]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    expire_time: _timestamp_pb2.Timestamp
    path: str
    url: str
    def __init__(self, path: _Optional[str] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., url: _Optional[str] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ["request_id", "session_id"]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class EventBatch(_message.Message):
    __slots__ = ["events"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_events_pb2.AgenticEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[_events_pb2.AgenticEvent, _Mapping]]] = ...) -> None: ...

class ForkSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class ForkSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionInfo
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionInfo, _Mapping]] = ...) -> None: ...

class GetAgentRequest(_message.Message):
    __slots__ = ["agent_id"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class GetAgentResponse(_message.Message):
    __slots__ = ["agent"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: _types_pb2.AgentInfo
    def __init__(self, agent: _Optional[_Union[_types_pb2.AgentInfo, _Mapping]] = ...) -> None: ...

class GetMessageRequest(_message.Message):
    __slots__ = ["message_id", "session_id"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., message_id: _Optional[str] = ...) -> None: ...

class GetMessageResponse(_message.Message):
    __slots__ = ["message"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: _types_pb2.SessionMessage
    def __init__(self, message: _Optional[_Union[_types_pb2.SessionMessage, _Mapping]] = ...) -> None: ...

class GetServerInfoRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetServerInfoResponse(_message.Message):
    __slots__ = ["caller", "features", "limits", "newest_sequence", "oldest_sequence", "session_count", "version", "workspace_roots"]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    NEWEST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    OLDEST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_COUNT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ROOTS_FIELD_NUMBER: _ClassVar[int]
    caller: Caller
    features: _containers.RepeatedScalarFieldContainer[str]
    limits: ServerLimits
    newest_sequence: int
    oldest_sequence: int
    session_count: int
    version: str
    workspace_roots: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, version: _Optional[str] = ..., limits: _Optional[_Union[ServerLimits, _Mapping]] = ..., oldest_sequence: _Optional[int] = ..., newest_sequence: _Optional[int] = ..., features: _Optional[_Iterable[str]] = ..., caller: _Optional[_Union[Caller, _Mapping]] = ..., session_count: _Optional[int] = ..., workspace_roots: _Optional[_Iterable[str]] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionInfo
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionInfo, _Mapping]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ["sequence", "server_time"]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SERVER_TIME_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    server_time: _timestamp_pb2.Timestamp
    def __init__(self, server_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., sequence: _Optional[int] = ...) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ["agents"]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[_types_pb2.AgentInfo]
    def __init__(self, agents: _Optional[_Iterable[_Union[_types_pb2.AgentInfo, _Mapping]]] = ...) -> None: ...

class ListAuditEventsRequest(_message.Message):
    __slots__ = ["after_id", "agent_ids", "end_time", "kinds", "page_size", "page_token", "session_ids", "start_time"]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_IDS_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    after_id: int
    agent_ids: _containers.RepeatedScalarFieldContainer[str]
    end_time: _timestamp_pb2.Timestamp
    kinds: _containers.RepeatedScalarFieldContainer[_audit_pb2.AuditKind]
    page_size: int
    page_token: str
    session_ids: _containers.RepeatedScalarFieldContainer[str]
    start_time: _timestamp_pb2.Timestamp
    def __init__(self, session_ids: _Optional[_Iterable[str]] = ..., agent_ids: _Optional[_Iterable[str]] = ..., kinds: _Optional[_Iterable[_Union[_audit_pb2.AuditKind, str]]] = ..., start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., after_id: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAuditEventsResponse(_message.Message):
    __slots__ = ["events", "more", "next_page_token"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_audit_pb2.AuditEvent]
    more: bool
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[_audit_pb2.AuditEvent, _Mapping]]] = ..., more: bool = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListMessagesRequest(_message.Message):
    __slots__ = ["order", "page_size", "page_token", "session_id"]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    order: MessageOrder
    page_size: int
    page_token: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order: _Optional[_Union[MessageOrder, str]] = ...) -> None: ...

class ListMessagesResponse(_message.Message):
    __slots__ = ["messages", "next_page_token"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.SessionMessage]
    next_page_token: str
    def __init__(self, messages: _Optional[_Iterable[_Union[_types_pb2.SessionMessage, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["agent_id", "page_size", "page_token", "statuses", "updated_after", "view", "workspace"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    page_size: int
    page_token: str
    statuses: _containers.RepeatedScalarFieldContainer[_types_pb2.SessionStatus]
    updated_after: _timestamp_pb2.Timestamp
    view: SessionView
    workspace: str
    def __init__(self, agent_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., statuses: _Optional[_Iterable[_Union[_types_pb2.SessionStatus, str]]] = ..., workspace: _Optional[str] = ..., updated_after: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., view: _Optional[_Union[SessionView, str]] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_page_token", "sessions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    sessions: _containers.RepeatedCompositeFieldContainer[_types_pb2.SessionInfo]
    def __init__(self, sessions: _Optional[_Iterable[_Union[_types_pb2.SessionInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class LoadSessionRequest(_message.Message):
    __slots__ = ["include_system_messages", "max_history", "session_id"]
    INCLUDE_SYSTEM_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_HISTORY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    include_system_messages: bool
    max_history: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., max_history: _Optional[int] = ..., include_system_messages: bool = ...) -> None: ...

class LoadSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionInfo
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionInfo, _Mapping]] = ...) -> None: ...

class LogoutAgentRequest(_message.Message):
    __slots__ = ["agent_id"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class LogoutAgentResponse(_message.Message):
    __slots__ = ["agent"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: _types_pb2.AgentInfo
    def __init__(self, agent: _Optional[_Union[_types_pb2.AgentInfo, _Mapping]] = ...) -> None: ...

class PermissionDecision(_message.Message):
    __slots__ = ["decided_by", "granted", "option_id", "option_kind", "permission_id"]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    OPTION_ID_FIELD_NUMBER: _ClassVar[int]
    OPTION_KIND_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    decided_by: _events_pb2.PermissionDecider
    granted: bool
    option_id: str
    option_kind: _types_pb2.PermissionOptionKind
    permission_id: str
    def __init__(self, permission_id: _Optional[str] = ..., option_id: _Optional[str] = ..., option_kind: _Optional[_Union[_types_pb2.PermissionOptionKind, str]] = ..., granted: bool = ..., decided_by: _Optional[_Union[_events_pb2.PermissionDecider, str]] = ...) -> None: ...

class RespondElicitationRequest(_message.Message):
    __slots__ = ["action", "content", "elicitation_id", "request_id", "session_id"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ELICITATION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    action: _types_pb2.ElicitationAction
    content: _struct_pb2.Struct
    elicitation_id: str
    request_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., elicitation_id: _Optional[str] = ..., action: _Optional[_Union[_types_pb2.ElicitationAction, str]] = ..., content: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class RespondElicitationResponse(_message.Message):
    __slots__ = ["resolution"]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    resolution: _events_pb2.ElicitationResolved
    def __init__(self, resolution: _Optional[_Union[_events_pb2.ElicitationResolved, _Mapping]] = ...) -> None: ...

class RespondPermissionRequest(_message.Message):
    __slots__ = ["option_id", "option_kind", "permission_id", "request_id", "session_id"]
    OPTION_ID_FIELD_NUMBER: _ClassVar[int]
    OPTION_KIND_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    option_id: str
    option_kind: _types_pb2.PermissionOptionKind
    permission_id: str
    request_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., permission_id: _Optional[str] = ..., option_id: _Optional[str] = ..., option_kind: _Optional[_Union[_types_pb2.PermissionOptionKind, str]] = ..., request_id: _Optional[str] = ...) -> None: ...

class RespondPermissionResponse(_message.Message):
    __slots__ = ["decision"]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    decision: PermissionDecision
    def __init__(self, decision: _Optional[_Union[PermissionDecision, _Mapping]] = ...) -> None: ...

class SendMessageRequest(_message.Message):
    __slots__ = ["content", "delivery", "message_id", "request_id", "session_id", "user_message_id"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    content: _types_pb2.MessageContent
    delivery: DeliveryMode
    message_id: str
    request_id: str
    session_id: str
    user_message_id: str
    def __init__(self, session_id: _Optional[str] = ..., content: _Optional[_Union[_types_pb2.MessageContent, _Mapping]] = ..., request_id: _Optional[str] = ..., message_id: _Optional[str] = ..., user_message_id: _Optional[str] = ..., delivery: _Optional[_Union[DeliveryMode, str]] = ...) -> None: ...

class SendMessageResponse(_message.Message):
    __slots__ = ["message_id", "outcome", "outcome_reason", "user_message_id"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_REASON_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    outcome: DeliveryOutcome
    outcome_reason: str
    user_message_id: str
    def __init__(self, message_id: _Optional[str] = ..., user_message_id: _Optional[str] = ..., outcome: _Optional[_Union[DeliveryOutcome, str]] = ..., outcome_reason: _Optional[str] = ...) -> None: ...

class ServerLimits(_message.Message):
    __slots__ = ["default_page_size", "heartbeat_interval", "max_event_bytes", "max_page_size", "max_response_bytes", "request_id_ttl", "subscriber_queue"]
    DEFAULT_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    MAX_EVENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_RESPONSE_BYTES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_TTL_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBER_QUEUE_FIELD_NUMBER: _ClassVar[int]
    default_page_size: int
    heartbeat_interval: _duration_pb2.Duration
    max_event_bytes: int
    max_page_size: int
    max_response_bytes: int
    request_id_ttl: _duration_pb2.Duration
    subscriber_queue: int
    def __init__(self, max_event_bytes: _Optional[int] = ..., default_page_size: _Optional[int] = ..., max_page_size: _Optional[int] = ..., max_response_bytes: _Optional[int] = ..., request_id_ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., heartbeat_interval: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., subscriber_queue: _Optional[int] = ...) -> None: ...

class SessionConfig(_message.Message):
    __slots__ = ["additional_directories", "mcp_servers", "mode_id", "model_id", "title", "webhook", "workspace"]
    ADDITIONAL_DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    additional_directories: _containers.RepeatedScalarFieldContainer[str]
    mcp_servers: _containers.RepeatedCompositeFieldContainer[_types_pb2.McpServer]
    mode_id: str
    model_id: str
    title: str
    webhook: SessionWebhook
    workspace: str
    def __init__(self, workspace: _Optional[str] = ..., model_id: _Optional[str] = ..., mode_id: _Optional[str] = ..., title: _Optional[str] = ..., mcp_servers: _Optional[_Iterable[_Union[_types_pb2.McpServer, _Mapping]]] = ..., additional_directories: _Optional[_Iterable[str]] = ..., webhook: _Optional[_Union[SessionWebhook, _Mapping]] = ...) -> None: ...

class SessionWebhook(_message.Message):
    __slots__ = ["events", "url"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedScalarFieldContainer[_types_pb2.WebhookEvent]
    url: str
    def __init__(self, url: _Optional[str] = ..., events: _Optional[_Iterable[_Union[_types_pb2.WebhookEvent, str]]] = ...) -> None: ...

class SetConfigOptionRequest(_message.Message):
    __slots__ = ["config_id", "session_id", "value"]
    CONFIG_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    config_id: str
    session_id: str
    value: str
    def __init__(self, session_id: _Optional[str] = ..., config_id: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class SetConfigOptionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionInfo
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionInfo, _Mapping]] = ...) -> None: ...

class SetModeRequest(_message.Message):
    __slots__ = ["mode_id", "session_id"]
    MODE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    mode_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., mode_id: _Optional[str] = ...) -> None: ...

class SetModeResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionInfo
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionInfo, _Mapping]] = ...) -> None: ...

class SetModelRequest(_message.Message):
    __slots__ = ["model_id", "session_id"]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., model_id: _Optional[str] = ...) -> None: ...

class SetModelResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionInfo
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionInfo, _Mapping]] = ...) -> None: ...

class ShareSessionRequest(_message.Message):
    __slots__ = ["acl", "session_id"]
    ACL_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    acl: _containers.RepeatedCompositeFieldContainer[_types_pb2.SessionGrant]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., acl: _Optional[_Iterable[_Union[_types_pb2.SessionGrant, _Mapping]]] = ...) -> None: ...

class ShareSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionInfo
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionInfo, _Mapping]] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ["after_sequence", "agent_ids", "oldest_held", "session_ids", "types", "unmerged_deltas"]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    AGENT_IDS_FIELD_NUMBER: _ClassVar[int]
    OLDEST_HELD_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    UNMERGED_DELTAS_FIELD_NUMBER: _ClassVar[int]
    after_sequence: int
    agent_ids: _containers.RepeatedScalarFieldContainer[str]
    oldest_held: bool
    session_ids: _containers.RepeatedScalarFieldContainer[str]
    types: _containers.RepeatedScalarFieldContainer[_events_pb2.AgenticEventType]
    unmerged_deltas: bool
    def __init__(self, session_ids: _Optional[_Iterable[str]] = ..., agent_ids: _Optional[_Iterable[str]] = ..., after_sequence: _Optional[int] = ..., oldest_held: bool = ..., types: _Optional[_Iterable[_Union[_events_pb2.AgenticEventType, str]]] = ..., unmerged_deltas: bool = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ["bookmark", "caught_up", "events", "heartbeat"]
    BOOKMARK_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    bookmark: Bookmark
    caught_up: CaughtUp
    events: EventBatch
    heartbeat: Heartbeat
    def __init__(self, events: _Optional[_Union[EventBatch, _Mapping]] = ..., bookmark: _Optional[_Union[Bookmark, _Mapping]] = ..., caught_up: _Optional[_Union[CaughtUp, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ...) -> None: ...

class WaitMessageRequest(_message.Message):
    __slots__ = ["message_id", "session_id"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., message_id: _Optional[str] = ...) -> None: ...

class WaitMessageResponse(_message.Message):
    __slots__ = ["message"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: _types_pb2.SessionMessage
    def __init__(self, message: _Optional[_Union[_types_pb2.SessionMessage, _Mapping]] = ...) -> None: ...

class SessionView(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class DeliveryMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class DeliveryOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MessageOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
