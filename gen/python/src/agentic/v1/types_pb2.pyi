from agentic.v1 import errors_pb2 as _errors_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

AGENT_STATUS_CRASHED: AgentStatus
AGENT_STATUS_NEEDS_AUTH: AgentStatus
AGENT_STATUS_NEEDS_CONFIGURATION: AgentStatus
AGENT_STATUS_NOT_STARTED: AgentStatus
AGENT_STATUS_READY: AgentStatus
AGENT_STATUS_STARTING: AgentStatus
AGENT_STATUS_UNSPECIFIED: AgentStatus
AGENT_TYPE_ACP: AgentType
AGENT_TYPE_DEEPCHAT: AgentType
AGENT_TYPE_UNSPECIFIED: AgentType
CONFIG_OPTION_TYPE_BOOLEAN: ConfigOptionType
CONFIG_OPTION_TYPE_SELECT: ConfigOptionType
CONFIG_OPTION_TYPE_UNSPECIFIED: ConfigOptionType
DESCRIPTOR: _descriptor.FileDescriptor
ELICITATION_ACTION_ACCEPT: ElicitationAction
ELICITATION_ACTION_CANCEL: ElicitationAction
ELICITATION_ACTION_DECLINE: ElicitationAction
ELICITATION_ACTION_UNSPECIFIED: ElicitationAction
ELICITATION_MODE_FORM: ElicitationMode
ELICITATION_MODE_UNSPECIFIED: ElicitationMode
ELICITATION_MODE_URL: ElicitationMode
MESSAGE_ROLE_ASSISTANT: MessageRole
MESSAGE_ROLE_SYSTEM: MessageRole
MESSAGE_ROLE_UNSPECIFIED: MessageRole
MESSAGE_ROLE_USER: MessageRole
MESSAGE_STATUS_CANCELLED: MessageStatus
MESSAGE_STATUS_COMPLETE: MessageStatus
MESSAGE_STATUS_ERROR: MessageStatus
MESSAGE_STATUS_INCOMPLETE: MessageStatus
MESSAGE_STATUS_UNSPECIFIED: MessageStatus
PERMISSION_OPTION_KIND_ALLOW_ALWAYS: PermissionOptionKind
PERMISSION_OPTION_KIND_ALLOW_ONCE: PermissionOptionKind
PERMISSION_OPTION_KIND_REJECT_ALWAYS: PermissionOptionKind
PERMISSION_OPTION_KIND_REJECT_ONCE: PermissionOptionKind
PERMISSION_OPTION_KIND_UNSPECIFIED: PermissionOptionKind
PERMISSION_TYPE_ALL: PermissionType
PERMISSION_TYPE_COMMAND: PermissionType
PERMISSION_TYPE_READ: PermissionType
PERMISSION_TYPE_UNSPECIFIED: PermissionType
PERMISSION_TYPE_WRITE: PermissionType
PLAN_ENTRY_PRIORITY_HIGH: PlanEntryPriority
PLAN_ENTRY_PRIORITY_LOW: PlanEntryPriority
PLAN_ENTRY_PRIORITY_MEDIUM: PlanEntryPriority
PLAN_ENTRY_PRIORITY_UNSPECIFIED: PlanEntryPriority
PLAN_ENTRY_STATUS_COMPLETED: PlanEntryStatus
PLAN_ENTRY_STATUS_IN_PROGRESS: PlanEntryStatus
PLAN_ENTRY_STATUS_PENDING: PlanEntryStatus
PLAN_ENTRY_STATUS_UNSPECIFIED: PlanEntryStatus
RISK_LEVEL_CRITICAL: RiskLevel
RISK_LEVEL_HIGH: RiskLevel
RISK_LEVEL_LOW: RiskLevel
RISK_LEVEL_MEDIUM: RiskLevel
RISK_LEVEL_UNSPECIFIED: RiskLevel
SESSION_ACCESS_READ: SessionAccess
SESSION_ACCESS_UNSPECIFIED: SessionAccess
SESSION_ACCESS_WRITE: SessionAccess
SESSION_STATUS_CLOSED: SessionStatus
SESSION_STATUS_ERROR: SessionStatus
SESSION_STATUS_GENERATING: SessionStatus
SESSION_STATUS_IDLE: SessionStatus
SESSION_STATUS_PAUSED: SessionStatus
SESSION_STATUS_UNSPECIFIED: SessionStatus
STOP_REASON_CANCELLED: StopReason
STOP_REASON_END_TURN: StopReason
STOP_REASON_ERROR: StopReason
STOP_REASON_INTERRUPTED: StopReason
STOP_REASON_MAX_TOKENS: StopReason
STOP_REASON_MAX_TURN_REQUESTS: StopReason
STOP_REASON_REFUSAL: StopReason
STOP_REASON_UNSPECIFIED: StopReason
TOOL_KIND_DELETE: ToolKind
TOOL_KIND_EDIT: ToolKind
TOOL_KIND_EXECUTE: ToolKind
TOOL_KIND_FETCH: ToolKind
TOOL_KIND_MOVE: ToolKind
TOOL_KIND_OTHER: ToolKind
TOOL_KIND_READ: ToolKind
TOOL_KIND_SEARCH: ToolKind
TOOL_KIND_SWITCH_MODE: ToolKind
TOOL_KIND_THINK: ToolKind
TOOL_KIND_UNSPECIFIED: ToolKind
TOOL_STATUS_CANCELLED: ToolStatus
TOOL_STATUS_COMPLETED: ToolStatus
TOOL_STATUS_FAILED: ToolStatus
TOOL_STATUS_IN_PROGRESS: ToolStatus
TOOL_STATUS_PENDING: ToolStatus
TOOL_STATUS_UNSPECIFIED: ToolStatus
WEBHOOK_EVENT_ELICITATION_REQUIRED: WebhookEvent
WEBHOOK_EVENT_ERROR: WebhookEvent
WEBHOOK_EVENT_PERMISSION_REQUIRED: WebhookEvent
WEBHOOK_EVENT_SESSION_CLOSED: WebhookEvent
WEBHOOK_EVENT_TURN_ENDED: WebhookEvent
WEBHOOK_EVENT_UNSPECIFIED: WebhookEvent

class ActionBlock(_message.Message):
    __slots__ = ["action_type", "description", "permission"]
    ACTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    action_type: str
    description: str
    permission: PermissionRequest
    def __init__(self, action_type: _Optional[str] = ..., description: _Optional[str] = ..., permission: _Optional[_Union[PermissionRequest, _Mapping]] = ...) -> None: ...

class AgentInfo(_message.Message):
    __slots__ = ["agent_id", "auth_methods", "capabilities", "config_source", "confinement", "description", "implementation", "name", "status", "status_reason", "type"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    AUTH_METHODS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    CONFIG_SOURCE_FIELD_NUMBER: _ClassVar[int]
    CONFINEMENT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    IMPLEMENTATION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    auth_methods: _containers.RepeatedCompositeFieldContainer[AuthMethod]
    capabilities: Capabilities
    config_source: str
    confinement: str
    description: str
    implementation: Implementation
    name: str
    status: AgentStatus
    status_reason: str
    type: AgentType
    def __init__(self, agent_id: _Optional[str] = ..., name: _Optional[str] = ..., type: _Optional[_Union[AgentType, str]] = ..., description: _Optional[str] = ..., status: _Optional[_Union[AgentStatus, str]] = ..., status_reason: _Optional[str] = ..., auth_methods: _Optional[_Iterable[_Union[AuthMethod, _Mapping]]] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ..., implementation: _Optional[_Union[Implementation, _Mapping]] = ..., config_source: _Optional[str] = ..., confinement: _Optional[str] = ...) -> None: ...

class AuthMethod(_message.Message):
    __slots__ = ["description", "id", "name"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    description: str
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class Block(_message.Message):
    __slots__ = ["action", "diff", "error", "image", "mcp_ui_resource", "plan", "reasoning", "resource", "search", "terminal", "text", "tool"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    MCP_UI_RESOURCE_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    TERMINAL_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    action: ActionBlock
    diff: DiffBlock
    error: ErrorBlock
    image: ImageBlock
    mcp_ui_resource: McpUiResourceBlock
    plan: PlanBlock
    reasoning: ReasoningBlock
    resource: ResourceBlock
    search: SearchBlock
    terminal: TerminalBlock
    text: TextBlock
    tool: ToolCall
    def __init__(self, text: _Optional[_Union[TextBlock, _Mapping]] = ..., reasoning: _Optional[_Union[ReasoningBlock, _Mapping]] = ..., tool: _Optional[_Union[ToolCall, _Mapping]] = ..., error: _Optional[_Union[ErrorBlock, _Mapping]] = ..., image: _Optional[_Union[ImageBlock, _Mapping]] = ..., action: _Optional[_Union[ActionBlock, _Mapping]] = ..., search: _Optional[_Union[SearchBlock, _Mapping]] = ..., mcp_ui_resource: _Optional[_Union[McpUiResourceBlock, _Mapping]] = ..., plan: _Optional[_Union[PlanBlock, _Mapping]] = ..., diff: _Optional[_Union[DiffBlock, _Mapping]] = ..., terminal: _Optional[_Union[TerminalBlock, _Mapping]] = ..., resource: _Optional[_Union[ResourceBlock, _Mapping]] = ...) -> None: ...

class Capabilities(_message.Message):
    __slots__ = ["supports_additional_directories", "supports_commands", "supports_delete", "supports_elicitation", "supports_load", "supports_logout", "supports_mcp", "supports_mcp_http", "supports_models", "supports_modes", "supports_resources", "supports_session_list", "supports_tools", "supports_vision"]
    SUPPORTS_ADDITIONAL_DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_DELETE_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_ELICITATION_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_LOAD_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_LOGOUT_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_MCP_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_MCP_HTTP_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_MODELS_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_MODES_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_SESSION_LIST_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_TOOLS_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_VISION_FIELD_NUMBER: _ClassVar[int]
    supports_additional_directories: bool
    supports_commands: bool
    supports_delete: bool
    supports_elicitation: bool
    supports_load: bool
    supports_logout: bool
    supports_mcp: bool
    supports_mcp_http: bool
    supports_models: bool
    supports_modes: bool
    supports_resources: bool
    supports_session_list: bool
    supports_tools: bool
    supports_vision: bool
    def __init__(self, supports_vision: bool = ..., supports_tools: bool = ..., supports_modes: bool = ..., supports_commands: bool = ..., supports_load: bool = ..., supports_models: bool = ..., supports_resources: bool = ..., supports_mcp: bool = ..., supports_mcp_http: bool = ..., supports_additional_directories: bool = ..., supports_delete: bool = ..., supports_session_list: bool = ..., supports_logout: bool = ..., supports_elicitation: bool = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ["description", "input_hint", "name"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_HINT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    description: str
    input_hint: str
    name: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_hint: _Optional[str] = ...) -> None: ...

class CommandInfo(_message.Message):
    __slots__ = ["base_command", "command", "cwd", "reason", "risk_level", "signature", "suggestion"]
    BASE_COMMAND_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RISK_LEVEL_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    SUGGESTION_FIELD_NUMBER: _ClassVar[int]
    base_command: str
    command: str
    cwd: str
    reason: str
    risk_level: RiskLevel
    signature: str
    suggestion: str
    def __init__(self, command: _Optional[str] = ..., risk_level: _Optional[_Union[RiskLevel, str]] = ..., reason: _Optional[str] = ..., suggestion: _Optional[str] = ..., signature: _Optional[str] = ..., base_command: _Optional[str] = ..., cwd: _Optional[str] = ...) -> None: ...

class ConfigChoice(_message.Message):
    __slots__ = ["description", "group", "name", "value"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    description: str
    group: str
    name: str
    value: str
    def __init__(self, value: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class ConfigOption(_message.Message):
    __slots__ = ["category", "choices", "current_value", "description", "id", "name", "type"]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    CURRENT_VALUE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    category: str
    choices: _containers.RepeatedCompositeFieldContainer[ConfigChoice]
    current_value: str
    description: str
    id: str
    name: str
    type: ConfigOptionType
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., category: _Optional[str] = ..., type: _Optional[_Union[ConfigOptionType, str]] = ..., current_value: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[ConfigChoice, _Mapping]]] = ...) -> None: ...

class ContentPart(_message.Message):
    __slots__ = ["file", "image", "resource", "text"]
    FILE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    file: FileContent
    image: ImageContent
    resource: EmbeddedResource
    text: str
    def __init__(self, text: _Optional[str] = ..., image: _Optional[_Union[ImageContent, _Mapping]] = ..., file: _Optional[_Union[FileContent, _Mapping]] = ..., resource: _Optional[_Union[EmbeddedResource, _Mapping]] = ...) -> None: ...

class DiffBlock(_message.Message):
    __slots__ = ["new_text", "old_text", "path"]
    NEW_TEXT_FIELD_NUMBER: _ClassVar[int]
    OLD_TEXT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    new_text: str
    old_text: str
    path: str
    def __init__(self, path: _Optional[str] = ..., old_text: _Optional[str] = ..., new_text: _Optional[str] = ...) -> None: ...

class ElicitationRequest(_message.Message):
    __slots__ = ["elicitation_id", "message", "message_id", "mode", "request_time", "requested_schema", "tool_id", "url"]
    ELICITATION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TIME_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    elicitation_id: str
    message: str
    message_id: str
    mode: ElicitationMode
    request_time: _timestamp_pb2.Timestamp
    requested_schema: _struct_pb2.Struct
    tool_id: str
    url: str
    def __init__(self, elicitation_id: _Optional[str] = ..., tool_id: _Optional[str] = ..., message_id: _Optional[str] = ..., message: _Optional[str] = ..., mode: _Optional[_Union[ElicitationMode, str]] = ..., requested_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., url: _Optional[str] = ..., request_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class EmbeddedResource(_message.Message):
    __slots__ = ["blob", "mime_type", "text", "uri"]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    blob: bytes
    mime_type: str
    text: str
    uri: str
    def __init__(self, uri: _Optional[str] = ..., mime_type: _Optional[str] = ..., text: _Optional[str] = ..., blob: _Optional[bytes] = ...) -> None: ...

class ErrorBlock(_message.Message):
    __slots__ = ["message", "reason"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    message: str
    reason: _errors_pb2.ErrorReason
    def __init__(self, message: _Optional[str] = ..., reason: _Optional[_Union[_errors_pb2.ErrorReason, str]] = ...) -> None: ...

class FileContent(_message.Message):
    __slots__ = ["mime_type", "name", "path"]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    mime_type: str
    name: str
    path: str
    def __init__(self, path: _Optional[str] = ..., name: _Optional[str] = ..., mime_type: _Optional[str] = ...) -> None: ...

class ImageBlock(_message.Message):
    __slots__ = ["data", "mime_type", "url"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    mime_type: str
    url: str
    def __init__(self, mime_type: _Optional[str] = ..., url: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class ImageContent(_message.Message):
    __slots__ = ["data", "file_path", "mime_type", "url"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    file_path: str
    mime_type: str
    url: str
    def __init__(self, url: _Optional[str] = ..., data: _Optional[bytes] = ..., file_path: _Optional[str] = ..., mime_type: _Optional[str] = ...) -> None: ...

class Implementation(_message.Message):
    __slots__ = ["name", "title", "version"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    title: str
    version: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., title: _Optional[str] = ...) -> None: ...

class McpHttpServer(_message.Message):
    __slots__ = ["headers", "url"]
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    headers: _containers.ScalarMap[str, str]
    url: str
    def __init__(self, url: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class McpServer(_message.Message):
    __slots__ = ["http", "name", "stdio"]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STDIO_FIELD_NUMBER: _ClassVar[int]
    http: McpHttpServer
    name: str
    stdio: McpStdioServer
    def __init__(self, name: _Optional[str] = ..., stdio: _Optional[_Union[McpStdioServer, _Mapping]] = ..., http: _Optional[_Union[McpHttpServer, _Mapping]] = ...) -> None: ...

class McpStdioServer(_message.Message):
    __slots__ = ["args", "command", "env"]
    class EnvEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ARGS_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    command: str
    env: _containers.ScalarMap[str, str]
    def __init__(self, command: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ...) -> None: ...

class McpUiResourceBlock(_message.Message):
    __slots__ = ["mime_type", "text", "uri"]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    mime_type: str
    text: str
    uri: str
    def __init__(self, uri: _Optional[str] = ..., mime_type: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class MessageContent(_message.Message):
    __slots__ = ["parts"]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    parts: _containers.RepeatedCompositeFieldContainer[ContentPart]
    def __init__(self, parts: _Optional[_Iterable[_Union[ContentPart, _Mapping]]] = ...) -> None: ...

class Mode(_message.Message):
    __slots__ = ["description", "id", "name"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    description: str
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ["description", "id", "name"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    description: str
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class PermissionOption(_message.Message):
    __slots__ = ["kind", "name", "option_id"]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OPTION_ID_FIELD_NUMBER: _ClassVar[int]
    kind: PermissionOptionKind
    name: str
    option_id: str
    def __init__(self, option_id: _Optional[str] = ..., name: _Optional[str] = ..., kind: _Optional[_Union[PermissionOptionKind, str]] = ...) -> None: ...

class PermissionRequest(_message.Message):
    __slots__ = ["arguments", "command_info", "description", "diffs", "message_id", "options", "paths", "permission_id", "permission_type", "rememberable", "request_time", "server_name", "tool_id", "tool_name"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    COMMAND_INFO_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DIFFS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    REMEMBERABLE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TIME_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    arguments: _struct_pb2.Value
    command_info: CommandInfo
    description: str
    diffs: _containers.RepeatedCompositeFieldContainer[DiffBlock]
    message_id: str
    options: _containers.RepeatedCompositeFieldContainer[PermissionOption]
    paths: _containers.RepeatedScalarFieldContainer[str]
    permission_id: str
    permission_type: PermissionType
    rememberable: bool
    request_time: _timestamp_pb2.Timestamp
    server_name: str
    tool_id: str
    tool_name: str
    def __init__(self, permission_id: _Optional[str] = ..., tool_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., permission_type: _Optional[_Union[PermissionType, str]] = ..., description: _Optional[str] = ..., command_info: _Optional[_Union[CommandInfo, _Mapping]] = ..., paths: _Optional[_Iterable[str]] = ..., options: _Optional[_Iterable[_Union[PermissionOption, _Mapping]]] = ..., rememberable: bool = ..., server_name: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., message_id: _Optional[str] = ..., request_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., diffs: _Optional[_Iterable[_Union[DiffBlock, _Mapping]]] = ...) -> None: ...

class PlanBlock(_message.Message):
    __slots__ = ["entries"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[PlanEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[PlanEntry, _Mapping]]] = ...) -> None: ...

class PlanEntry(_message.Message):
    __slots__ = ["content", "priority", "status"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    content: str
    priority: PlanEntryPriority
    status: PlanEntryStatus
    def __init__(self, content: _Optional[str] = ..., status: _Optional[_Union[PlanEntryStatus, str]] = ..., priority: _Optional[_Union[PlanEntryPriority, str]] = ...) -> None: ...

class QueuedMessage(_message.Message):
    __slots__ = ["content", "message_id", "principal", "queue_time", "reason", "user_message_id"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    QUEUE_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    content: MessageContent
    message_id: str
    principal: str
    queue_time: _timestamp_pb2.Timestamp
    reason: str
    user_message_id: str
    def __init__(self, message_id: _Optional[str] = ..., user_message_id: _Optional[str] = ..., content: _Optional[_Union[MessageContent, _Mapping]] = ..., queue_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., principal: _Optional[str] = ...) -> None: ...

class ReasoningBlock(_message.Message):
    __slots__ = ["text"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ResourceBlock(_message.Message):
    __slots__ = ["blob", "mime_type", "name", "text", "uri"]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    blob: bytes
    mime_type: str
    name: str
    text: str
    uri: str
    def __init__(self, uri: _Optional[str] = ..., name: _Optional[str] = ..., mime_type: _Optional[str] = ..., text: _Optional[str] = ..., blob: _Optional[bytes] = ...) -> None: ...

class SearchBlock(_message.Message):
    __slots__ = ["query", "results"]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    query: str
    results: _containers.RepeatedCompositeFieldContainer[SearchResult]
    def __init__(self, query: _Optional[str] = ..., results: _Optional[_Iterable[_Union[SearchResult, _Mapping]]] = ...) -> None: ...

class SearchResult(_message.Message):
    __slots__ = ["snippet", "title", "url"]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    snippet: str
    title: str
    url: str
    def __init__(self, title: _Optional[str] = ..., url: _Optional[str] = ..., snippet: _Optional[str] = ...) -> None: ...

class SessionGrant(_message.Message):
    __slots__ = ["access", "group", "principal"]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    access: SessionAccess
    group: str
    principal: str
    def __init__(self, principal: _Optional[str] = ..., group: _Optional[str] = ..., access: _Optional[_Union[SessionAccess, str]] = ...) -> None: ...

class SessionInfo(_message.Message):
    __slots__ = ["acl", "additional_directories", "agent_id", "agent_session_id", "available_commands", "available_models", "available_modes", "capabilities", "config_options", "create_time", "current_mode_id", "current_model_id", "last_sequence", "mcp_server_names", "message_count", "message_in_flight", "message_in_flight_first_sequence", "owner", "pending_elicitations", "pending_permissions", "queued_messages", "session_id", "status", "status_reason", "title", "update_time", "usage", "workspace"]
    ACL_FIELD_NUMBER: _ClassVar[int]
    ADDITIONAL_DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_MODELS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_MODES_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    CONFIG_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    CURRENT_MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    CURRENT_MODE_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVER_NAMES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IN_FLIGHT_FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PENDING_ELICITATIONS_FIELD_NUMBER: _ClassVar[int]
    PENDING_PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    QUEUED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    acl: _containers.RepeatedCompositeFieldContainer[SessionGrant]
    additional_directories: _containers.RepeatedScalarFieldContainer[str]
    agent_id: str
    agent_session_id: str
    available_commands: _containers.RepeatedCompositeFieldContainer[Command]
    available_models: _containers.RepeatedCompositeFieldContainer[Model]
    available_modes: _containers.RepeatedCompositeFieldContainer[Mode]
    capabilities: Capabilities
    config_options: _containers.RepeatedCompositeFieldContainer[ConfigOption]
    create_time: _timestamp_pb2.Timestamp
    current_mode_id: str
    current_model_id: str
    last_sequence: int
    mcp_server_names: _containers.RepeatedScalarFieldContainer[str]
    message_count: int
    message_in_flight: str
    message_in_flight_first_sequence: int
    owner: str
    pending_elicitations: _containers.RepeatedCompositeFieldContainer[ElicitationRequest]
    pending_permissions: _containers.RepeatedCompositeFieldContainer[PermissionRequest]
    queued_messages: _containers.RepeatedCompositeFieldContainer[QueuedMessage]
    session_id: str
    status: SessionStatus
    status_reason: str
    title: str
    update_time: _timestamp_pb2.Timestamp
    usage: TokenUsage
    workspace: str
    def __init__(self, session_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., status_reason: _Optional[str] = ..., workspace: _Optional[str] = ..., title: _Optional[str] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., available_modes: _Optional[_Iterable[_Union[Mode, _Mapping]]] = ..., current_mode_id: _Optional[str] = ..., available_models: _Optional[_Iterable[_Union[Model, _Mapping]]] = ..., current_model_id: _Optional[str] = ..., available_commands: _Optional[_Iterable[_Union[Command, _Mapping]]] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., message_in_flight: _Optional[str] = ..., pending_permissions: _Optional[_Iterable[_Union[PermissionRequest, _Mapping]]] = ..., last_sequence: _Optional[int] = ..., message_count: _Optional[int] = ..., message_in_flight_first_sequence: _Optional[int] = ..., agent_session_id: _Optional[str] = ..., additional_directories: _Optional[_Iterable[str]] = ..., mcp_server_names: _Optional[_Iterable[str]] = ..., pending_elicitations: _Optional[_Iterable[_Union[ElicitationRequest, _Mapping]]] = ..., owner: _Optional[str] = ..., acl: _Optional[_Iterable[_Union[SessionGrant, _Mapping]]] = ..., queued_messages: _Optional[_Iterable[_Union[QueuedMessage, _Mapping]]] = ..., config_options: _Optional[_Iterable[_Union[ConfigOption, _Mapping]]] = ...) -> None: ...

class SessionMessage(_message.Message):
    __slots__ = ["blocks", "create_time", "message_id", "principal", "role", "session_id", "status", "stop_reason", "usage"]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    blocks: _containers.RepeatedCompositeFieldContainer[Block]
    create_time: _timestamp_pb2.Timestamp
    message_id: str
    principal: str
    role: MessageRole
    session_id: str
    status: MessageStatus
    stop_reason: StopReason
    usage: TokenUsage
    def __init__(self, message_id: _Optional[str] = ..., session_id: _Optional[str] = ..., role: _Optional[_Union[MessageRole, str]] = ..., status: _Optional[_Union[MessageStatus, str]] = ..., blocks: _Optional[_Iterable[_Union[Block, _Mapping]]] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., stop_reason: _Optional[_Union[StopReason, str]] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., principal: _Optional[str] = ...) -> None: ...

class TerminalBlock(_message.Message):
    __slots__ = ["command", "exit_code", "output", "output_offset", "signal", "terminal_id", "truncated"]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    TERMINAL_ID_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    command: str
    exit_code: int
    output: str
    output_offset: int
    signal: str
    terminal_id: str
    truncated: bool
    def __init__(self, terminal_id: _Optional[str] = ..., command: _Optional[str] = ..., output: _Optional[str] = ..., truncated: bool = ..., exit_code: _Optional[int] = ..., signal: _Optional[str] = ..., output_offset: _Optional[int] = ...) -> None: ...

class TextBlock(_message.Message):
    __slots__ = ["text"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class TokenUsage(_message.Message):
    __slots__ = ["cached_input_tokens", "context_size", "context_used", "cost", "cost_currency", "input_tokens", "output_tokens", "reasoning_tokens", "total_tokens"]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_SIZE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_USED_FIELD_NUMBER: _ClassVar[int]
    COST_CURRENCY_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    cached_input_tokens: int
    context_size: int
    context_used: int
    cost: float
    cost_currency: str
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    total_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ..., context_used: _Optional[int] = ..., context_size: _Optional[int] = ..., cost: _Optional[float] = ..., cost_currency: _Optional[str] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ["arguments", "command_info", "content", "error", "kind", "locations", "result", "status", "title", "tool_id", "tool_name"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    COMMAND_INFO_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LOCATIONS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    arguments: _struct_pb2.Value
    command_info: CommandInfo
    content: _containers.RepeatedCompositeFieldContainer[ToolContent]
    error: str
    kind: ToolKind
    locations: _containers.RepeatedCompositeFieldContainer[ToolLocation]
    result: _struct_pb2.Value
    status: ToolStatus
    title: str
    tool_id: str
    tool_name: str
    def __init__(self, tool_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., title: _Optional[str] = ..., kind: _Optional[_Union[ToolKind, str]] = ..., status: _Optional[_Union[ToolStatus, str]] = ..., arguments: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error: _Optional[str] = ..., locations: _Optional[_Iterable[_Union[ToolLocation, _Mapping]]] = ..., content: _Optional[_Iterable[_Union[ToolContent, _Mapping]]] = ..., command_info: _Optional[_Union[CommandInfo, _Mapping]] = ...) -> None: ...

class ToolContent(_message.Message):
    __slots__ = ["diff", "image", "resource", "terminal", "text"]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TERMINAL_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    diff: DiffBlock
    image: ImageBlock
    resource: ResourceBlock
    terminal: TerminalBlock
    text: str
    def __init__(self, text: _Optional[str] = ..., diff: _Optional[_Union[DiffBlock, _Mapping]] = ..., terminal: _Optional[_Union[TerminalBlock, _Mapping]] = ..., image: _Optional[_Union[ImageBlock, _Mapping]] = ..., resource: _Optional[_Union[ResourceBlock, _Mapping]] = ...) -> None: ...

class ToolLocation(_message.Message):
    __slots__ = ["line", "path"]
    LINE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    line: int
    path: str
    def __init__(self, path: _Optional[str] = ..., line: _Optional[int] = ...) -> None: ...

class AgentType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class AgentStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SessionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ConfigOptionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SessionAccess(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class RiskLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PermissionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PermissionOptionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ElicitationMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ElicitationAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ToolKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ToolStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PlanEntryStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PlanEntryPriority(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MessageRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MessageStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class StopReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class WebhookEvent(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
