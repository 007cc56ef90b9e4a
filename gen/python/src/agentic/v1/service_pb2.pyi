from agentic.v1 import events_pb2 as _events_pb2
from agentic.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CancelMessageRequest(_message.Message):
    __slots__ = ["message_id", "session_id"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., message_id: _Optional[str] = ...) -> None: ...

class CancelMessageResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ["agent_id", "config"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    config: SessionConfig
    def __init__(self, agent_id: _Optional[str] = ..., config: _Optional[_Union[SessionConfig, _Mapping]] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionInfo
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionInfo, _Mapping]] = ...) -> None: ...

class GetMessagesRequest(_message.Message):
    __slots__ = ["before_message_id", "limit", "session_id"]
    BEFORE_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    before_message_id: str
    limit: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., limit: _Optional[int] = ..., before_message_id: _Optional[str] = ...) -> None: ...

class GetMessagesResponse(_message.Message):
    __slots__ = ["messages"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    def __init__(self, messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ...) -> None: ...

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

class ListAgentsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ["agents"]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[_types_pb2.AgentInfo]
    def __init__(self, agents: _Optional[_Iterable[_Union[_types_pb2.AgentInfo, _Mapping]]] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["agent_id", "page_size", "page_token"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    page_size: int
    page_token: str
    def __init__(self, agent_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

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

class RespondPermissionRequest(_message.Message):
    __slots__ = ["option_id", "option_kind", "request_id", "session_id"]
    OPTION_ID_FIELD_NUMBER: _ClassVar[int]
    OPTION_KIND_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    option_id: str
    option_kind: _types_pb2.PermissionOptionKind
    request_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., request_id: _Optional[str] = ..., option_id: _Optional[str] = ..., option_kind: _Optional[_Union[_types_pb2.PermissionOptionKind, str]] = ...) -> None: ...

class RespondPermissionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SendMessageRequest(_message.Message):
    __slots__ = ["content", "session_id"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    content: _types_pb2.MessageContent
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., content: _Optional[_Union[_types_pb2.MessageContent, _Mapping]] = ...) -> None: ...

class SendMessageResponse(_message.Message):
    __slots__ = ["message_id", "user_message_id"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    user_message_id: str
    def __init__(self, message_id: _Optional[str] = ..., user_message_id: _Optional[str] = ...) -> None: ...

class SessionConfig(_message.Message):
    __slots__ = ["mode_id", "model_id", "title", "workspace"]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    mode_id: str
    model_id: str
    title: str
    workspace: str
    def __init__(self, workspace: _Optional[str] = ..., model_id: _Optional[str] = ..., mode_id: _Optional[str] = ..., title: _Optional[str] = ...) -> None: ...

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

class SubscribeRequest(_message.Message):
    __slots__ = ["after_sequence", "agent_ids", "session_ids"]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    AGENT_IDS_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    after_sequence: int
    agent_ids: _containers.RepeatedScalarFieldContainer[str]
    session_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_ids: _Optional[_Iterable[str]] = ..., agent_ids: _Optional[_Iterable[str]] = ..., after_sequence: _Optional[int] = ...) -> None: ...
