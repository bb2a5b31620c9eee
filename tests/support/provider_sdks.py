"""The providers' SDKs with no network: their request TypedDicts made strict, their real
clients over a fake transport, and a fake Anthropic token-counting endpoint.

Strict, because pydantic ignores unknown keys in a TypedDict and validates an Iterable
lazily, so either would let a wrong request shape through.
"""

from __future__ import annotations

import copy
import importlib
import json
import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import anthropic
import openai
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from pydantic import TypeAdapter
from pydantic_core import SchemaValidator

from ctxbudget import get_tokenizer

# --- the SDKs' own request types, strict --------------------------------------------------------


def _tighten(node: object) -> None:
    """Forbid unknown keys in every TypedDict and model, and check Iterable items now."""
    if isinstance(node, dict):
        if node.get("type") in ("typed-dict", "model-fields"):
            node["extra_behavior"] = "forbid"
        if node.get("type") == "generator":
            node["type"] = "list"
        for value in node.values():
            _tighten(value)
    elif isinstance(node, list):
        for value in node:
            _tighten(value)


def strict(request_type: Any) -> SchemaValidator:
    schema = copy.deepcopy(TypeAdapter(request_type).core_schema)
    _tighten(schema)
    return SchemaValidator(schema)


OPENAI_REQUEST = strict(CompletionCreateParamsNonStreaming)
ANTHROPIC_REQUEST = strict(MessageCreateParamsNonStreaming)


def openai_valid(messages: object) -> None:
    OPENAI_REQUEST.validate_python({"model": "gpt-4o", "messages": messages})


def anthropic_valid(prompt: Any) -> None:
    ANTHROPIC_REQUEST.validate_python({**prompt, "model": "claude-test-model", "max_tokens": 64})


# --- the SDKs' clients over a fake transport ---------------------------------------------------

OPENAI_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
}
ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test-model",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


def http_package(client_class: type) -> ModuleType:
    """The HTTP package an SDK's client is built on (httpx, or httpx2 in newer SDKs)."""
    return next(
        importlib.import_module(package)
        for cls in client_class.__mro__[1:]
        if (package := cls.__module__.partition(".")[0]).startswith("httpx")
    )


def fake_transport(sdk: Any, reply: dict[str, Any], sent: list[dict[str, Any]]) -> Any:
    http = http_package(sdk.DefaultHttpxClient)

    def handle(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return http.Response(200, json=reply)

    return sdk.DefaultHttpxClient(transport=http.MockTransport(handle))


def openai_sends(messages: Any) -> dict[str, Any]:
    """The JSON body the OpenAI SDK posts for these messages."""
    sent: list[dict[str, Any]] = []
    client = openai.OpenAI(
        api_key="test",
        base_url="http://sdk.invalid/v1",
        max_retries=0,
        http_client=fake_transport(openai, OPENAI_REPLY, sent),
    )
    reply = client.chat.completions.create(model="gpt-4o", messages=messages)
    assert reply.choices[0].message.content == "ok"
    return sent[0]


def anthropic_sends(prompt: Any) -> dict[str, Any]:
    """The JSON body the Anthropic SDK posts for ``**prompt``."""
    sent: list[dict[str, Any]] = []
    client = anthropic.Anthropic(
        api_key="test",
        base_url="http://sdk.invalid",
        max_retries=0,
        http_client=fake_transport(anthropic, ANTHROPIC_REPLY, sent),
    )
    reply = client.messages.create(**prompt, model="claude-test-model", max_tokens=64)
    assert reply.content[0].type == "text"
    return sent[0]


# --- a fake /v1/messages/count_tokens -------------------------------------------------------

_O200K = get_tokenizer("o200k_base")

Body = dict[str, Any]

AHTTP: Any = http_package(anthropic.DefaultHttpxClient)
"""The HTTP package the Anthropic SDK is built on."""


def texts_in(body: object) -> list[str]:
    """Every "text" value in a request body: what a provider counts as prompt text."""
    if isinstance(body, dict):
        found = [body["text"]] if isinstance(body.get("text"), str) else []
        return found + [t for k, v in body.items() if k != "text" for t in texts_in(v)]
    if isinstance(body, list):
        return [t for item in body for t in texts_in(item)]
    return []


def scaled(factor: float) -> Callable[[Body], int]:
    """A provider that counts `factor` times o200k on the request's text (monotone)."""
    return lambda body: math.ceil(factor * sum(_O200K.count(t) for t in texts_in(body)))


AS_O200K = scaled(1.0)


class AnthropicServer:
    """A fake /v1/messages/count_tokens: records each body, answers {"input_tokens": N}."""

    def __init__(self, count: Callable[[Body], int] = AS_O200K) -> None:
        self.bodies: list[Body] = []
        self.paths: list[str] = []
        self.count = count
        self.fail: Any = None
        """An HTTP response or transport exception to answer with in place of a count."""

    def handle(self, request: Any) -> Any:
        if isinstance(self.fail, Exception):
            raise self.fail
        if self.fail is not None:
            return self.fail
        body = json.loads(request.content)
        self.bodies.append(body)
        self.paths.append(request.url.path)
        return AHTTP.Response(200, json={"input_tokens": self.count(body)})

    def client(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(
            api_key="test",
            base_url="http://sdk.invalid",
            max_retries=0,
            http_client=anthropic.DefaultHttpxClient(transport=AHTTP.MockTransport(self.handle)),
        )
