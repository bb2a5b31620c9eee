"""The provider count as the final check (docs/tokenizers.md, "The provider's own count as the
final check"): each SDK's real client over a fake transport, asserted on the request it sent
and on the report."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from typing import Any

import boto3
import httpx
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError
from botocore.stub import Stubber
from botocore.validate import ParamValidator
from google import genai
from google.genai import types as genai_types
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    CONVERSATION_START,
    Allocation,
    AnthropicCount,
    Assembled,
    BedrockCount,
    Budget,
    ContextAssembler,
    ContextBudgetError,
    GeminiCount,
    InputError,
    ProviderCount,
    ProviderCountError,
    Tool,
    Turn,
    get_tokenizer,
)
from tests.support.factories import chunks
from tests.support.imports import loaded_after
from tests.support.provider_sdks import (
    AHTTP,
    AS_O200K,
    AnthropicServer,
    Body,
    scaled,
    texts_in,
)

MODEL = "claude-sonnet-4-5"
TOOLS = [
    Tool(
        name="lookup",
        description="Look an order up.",
        parameters={"type": "object", "properties": {"id": {"type": "string"}}},
    )
]


def budget(total: int = 2_500, *, retrieved_min: int = 0) -> Budget:
    """System and question never trimmed; sources make room first, then tools."""
    return Budget(
        total=total,
        reserve_output=0,
        allocations=(
            Allocation("system", priority=0),
            Allocation("question", priority=0),
            Allocation("tools", max=400, priority=1),
            Allocation("retrieved", min=retrieved_min, priority=2),
            Allocation("history", priority=3),
        ),
    )


def assembler(provider: ProviderCount | None, **options: Any) -> ContextAssembler:
    return ContextAssembler(tokenizer=MODEL, budget=budget(), provider_count=provider, **options)


def ask(a: ContextAssembler, **inputs: Any) -> Assembled:
    return a.assemble(
        system="Answer from the sources.", question="Why?", chunks=chunks(30), **inputs
    )


# --- Anthropic: the real client over httpx.MockTransport ---------------------------------------


def anthropic_count(server: AnthropicServer) -> AnthropicCount:
    return AnthropicCount(server.client(), model=MODEL)


def test_anthropic_count_sends_the_finished_prompt_in_the_messages_shape() -> None:
    server = AnthropicServer()

    result = ask(assembler(anthropic_count(server)))

    assert server.paths == ["/v1/messages/count_tokens"]
    assert server.bodies == [{"model": MODEL, **result.messages(style="anthropic")}]


def test_anthropic_count_sends_the_sources_fenced() -> None:
    server = AnthropicServer()

    result = ask(assembler(anthropic_count(server)))

    sent = "\n".join(texts_in(server.bodies[0]))
    assert result.sources
    assert all(source.text in sent for source in result.sources)
    assert result.tail in sent


def test_anthropic_count_sends_native_tools_in_its_tools_parameter() -> None:
    server = AnthropicServer()

    result = ask(assembler(anthropic_count(server), native_tools=True), tools=TOOLS)

    assert server.bodies[0]["tools"] == result.tool_schemas(style="anthropic")


def test_provider_count_is_one_call_for_a_prompt_that_fits() -> None:
    server = AnthropicServer()

    ask(assembler(anthropic_count(server)))

    assert len(server.bodies) == 1


def test_report_total_is_the_provider_count() -> None:
    server = AnthropicServer(lambda body: 1_234)

    report = ask(assembler(anthropic_count(server))).report

    assert (report.total, report.unused) == (1_234, report.budget - 1_234)
    assert (report.count_exact, report.count_method) == (True, "anthropic count_tokens")
    assert (report.count_margin, report.count_fallback) == (None, None)


def test_report_dump_names_the_provider_count() -> None:
    report = ask(assembler(anthropic_count(AnthropicServer()))).report

    dumped = report.model_dump(mode="json")

    assert dumped["count_method"] == "anthropic count_tokens"
    assert "count_fallback" not in dumped


def test_report_dump_carries_the_fallback() -> None:
    server = AnthropicServer()
    server.fail = _error(429, "rate_limit_error")

    dumped = ask(assembler(anthropic_count(server))).report.model_dump(mode="json")

    assert dumped["count_fallback"].startswith("anthropic count_tokens failed: RateLimitError")
    assert dumped["count_method"] == "estimate:claude-v3"


# --- the recount loop --------------------------------------------------------------------------


def test_provider_count_over_the_budget_drops_and_recounts_until_it_fits() -> None:
    server = AnthropicServer(scaled(2.5))

    result = ask(assembler(anthropic_count(server)))

    assert 1 < len(server.bodies) <= 4
    assert server.count(server.bodies[-1]) == result.report.total <= result.report.budget
    assert server.bodies[-1] == {"model": MODEL, **result.messages(style="anthropic")}


def test_provider_count_drops_the_least_preferred_sources_first() -> None:
    offline = ask(assembler(None))

    result = ask(assembler(anthropic_count(AnthropicServer(scaled(2.5)))))

    kept = [s.chunk.id for s in result.sources]
    assert kept == [s.chunk.id for s in offline.sources][: len(kept)]
    assert result.report.final_check_drops > offline.report.final_check_drops


def test_provider_count_within_the_budget_drops_nothing() -> None:
    offline = ask(assembler(None))

    result = ask(assembler(anthropic_count(AnthropicServer(scaled(0.5)))))

    assert result.text == offline.text
    assert result.report.final_check_drops == offline.report.final_check_drops


def test_provider_count_far_over_recounts_what_is_left_before_raising() -> None:
    server = AnthropicServer(scaled(10.0))

    result = ask(assembler(anthropic_count(server)))

    assert result.sources == ()
    assert server.count(server.bodies[-1]) == result.report.total <= result.report.budget


def test_provider_count_over_at_the_floors_raises() -> None:
    a = ContextAssembler(
        tokenizer=MODEL,
        budget=budget(retrieved_min=1_200),
        provider_count=anthropic_count(AnthropicServer(scaled(4.0))),
    )

    with pytest.raises(
        ContextBudgetError,
        match=r"'retrieved' needs .*: the anthropic count_tokens count of the joined prompt "
        r"\([\d,]+\) is [\d,]+ over the budget, and retrieved cannot give up another item "
        r"without falling below its floor \(min=1200\)",
    ):
        ask(a)


def test_provider_count_over_with_nothing_to_drop_raises() -> None:
    a = assembler(anthropic_count(AnthropicServer(lambda body: 10_000)))

    with pytest.raises(
        ContextBudgetError, match=r"the never-trimmed parts alone exceed the budget once joined"
    ):
        a.assemble(system="Answer.", question="Why?")


def test_provider_count_still_over_after_four_counts_raises() -> None:
    server = AnthropicServer(lambda body: 2_501)  # one over, however much is dropped

    with pytest.raises(
        ContextBudgetError,
        match=r"the anthropic count_tokens count of the prompt was still over the budget "
        r"after 4 counts",
    ):
        ask(assembler(anthropic_count(server)))
    assert len(server.bodies) == 4


# --- falling back to the offline count ---------------------------------------------------------


def _error(status: int, kind: str) -> Any:
    return AHTTP.Response(status, json={"type": "error", "error": {"type": kind, "message": "no"}})


@pytest.mark.parametrize(
    ("fail", "error"),
    [
        (_error(429, "rate_limit_error"), "RateLimitError"),
        (_error(401, "authentication_error"), "AuthenticationError"),
        (_error(529, "overloaded_error"), "OverloadedError"),
        (AHTTP.ConnectError("refused"), "APIConnectionError"),
        (AHTTP.ReadTimeout("slow"), "APITimeoutError"),
    ],
)
def test_anthropic_count_failing_falls_back_to_the_offline_count(
    fail: Any, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    offline = ask(assembler(None))
    server = AnthropicServer()
    server.fail = fail

    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        result = ask(assembler(anthropic_count(server)))

    report = result.report
    assert result.text == offline.text
    assert (report.total, report.count_exact) == (offline.report.total, False)
    assert report.count_method == "estimate:claude-v3"
    assert report.count_fallback is not None
    assert report.count_fallback.startswith(f"anthropic count_tokens failed: {error}: ")
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"{report.count_fallback}; the offline count ({offline.report.total:,} tokens) stands"
    ]


def test_fallback_after_a_drop_keeps_the_trimmed_prompt_within_the_offline_count() -> None:
    calls: list[int] = []

    class FailsSecond:
        label = "flaky count"
        exact = True

        def count(self, prompt: Assembled) -> int:
            calls.append(1)
            if len(calls) > 1:
                raise ProviderCountError("flaky count failed: timeout")
            return prompt.report.budget + 300

    result = ask(assembler(FailsSecond()))

    assert len(calls) == 2
    assert result.report.count_fallback == "flaky count failed: timeout"
    assert result.report.total == _recounted_offline(result) <= result.report.budget


def _recounted_offline(result: Assembled) -> int:
    return get_tokenizer(MODEL).count(result.text)


def test_provider_count_returning_a_non_count_raises() -> None:
    class Broken:
        label = "broken count"
        exact = True

        def count(self, prompt: Assembled) -> int:
            return -1

    with pytest.raises(TypeError, match=r"broken count returned -1; a ProviderCount must return"):
        ask(assembler(Broken()))


def test_assembler_rejects_a_provider_count_that_is_not_one() -> None:
    with pytest.raises(TypeError, match=r"provider_count must be a ProviderCount, not str"):
        assembler("anthropic")  # type: ignore[arg-type]


# --- Bedrock: boto3's bedrock-runtime client under botocore's Stubber --------------------------


def bedrock_client() -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def test_bedrock_client_has_the_count_tokens_operation() -> None:
    assert "CountTokens" in bedrock_client().meta.service_model.operation_names


def test_bedrock_count_sends_the_finished_prompt_in_the_converse_shape() -> None:
    client = bedrock_client()
    offline = ask(assembler(None, native_tools=True), tools=TOOLS)
    converse: Body = {
        **offline.messages(style="bedrock"),
        "toolConfig": {"tools": offline.tool_schemas(style="bedrock")},
    }
    model_id = "anthropic.claude-sonnet-4-5-20250929-v1:0"
    with Stubber(client) as stub:
        stub.add_response(
            "count_tokens",
            {"inputTokens": 321},
            {"modelId": model_id, "input": {"converse": converse}},
        )
        result = ask(
            assembler(BedrockCount(client, model_id=model_id), native_tools=True), tools=TOOLS
        )
        stub.assert_no_pending_responses()

    assert (result.report.total, result.report.count_method) == (321, "bedrock count_tokens")
    assert result.text == offline.text


def test_bedrock_count_over_the_budget_drops_and_recounts() -> None:
    client = bedrock_client()
    sent: list[Body] = []
    client.meta.events.register(
        "provide-client-params.bedrock-runtime.CountTokens",
        lambda params, **_: sent.append(copy.deepcopy(params)),
    )
    count = scaled(2.5)
    # botocore's own hook answers in place of the service (the Stubber answers fixed replies
    # in order): each answer is computed from the request just validated and recorded.
    client.meta.events.register(
        "before-call.bedrock-runtime.CountTokens",
        lambda **_: (AWSResponse(None, 200, {}, None), {"inputTokens": count(sent[-1])}),
    )
    result = ask(assembler(BedrockCount(client, model_id="m")))

    assert len(sent) > 1
    assert count(sent[-1]) == result.report.total <= result.report.budget
    assert sent[-1]["input"]["converse"] == result.messages(style="bedrock")


@pytest.mark.parametrize("code", ["ThrottlingException", "AccessDeniedException"])
def test_bedrock_count_service_error_falls_back(code: str) -> None:
    client = bedrock_client()
    offline = ask(assembler(None))
    with Stubber(client) as stub:
        stub.add_client_error("count_tokens", service_error_code=code, http_status_code=400)
        report = ask(assembler(BedrockCount(client, model_id="m"))).report

    assert report.total == offline.report.total
    assert report.count_fallback is not None
    assert report.count_fallback.startswith(f"bedrock count_tokens failed: {code}: ")


def test_bedrock_count_timeout_falls_back() -> None:
    client = bedrock_client()

    def time_out(**_: Any) -> None:
        raise ReadTimeoutError(endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com")

    client.meta.events.register("before-call.bedrock-runtime.CountTokens", time_out)
    report = ask(assembler(BedrockCount(client, model_id="m"))).report

    assert report.count_fallback is not None
    assert report.count_fallback.startswith("bedrock count_tokens failed: ReadTimeoutError: ")


# --- Gemini: google-genai's Client over an httpx transport -------------------------------------


class GeminiServer:
    """A fake :countTokens endpoint: records each body, answers {"totalTokens": N}."""

    def __init__(self, count: Callable[[Body], int] = AS_O200K) -> None:
        self.bodies: list[Body] = []
        self.count = count
        self.fail: httpx.Response | Exception | None = None

    def handle(self, request: httpx.Request) -> httpx.Response:
        if isinstance(self.fail, Exception):
            raise self.fail
        if self.fail is not None:
            return self.fail
        body = json.loads(request.content)
        self.bodies.append(body)
        return httpx.Response(200, json={"totalTokens": self.count(body)})

    def client(self, *, vertexai: bool = False) -> genai.Client:
        return genai.Client(
            vertexai=vertexai,
            api_key="test",
            http_options=genai_types.HttpOptions(
                httpx_client=httpx.Client(transport=httpx.MockTransport(self.handle)),
                retry_options=genai_types.HttpRetryOptions(attempts=1),
            ),
        )


def gemini(server: GeminiServer, *, vertexai: bool = False, **options: Any) -> ContextAssembler:
    return ContextAssembler(
        tokenizer="gemini-2.5-flash",
        budget=budget(),
        provider_count=GeminiCount(server.client(vertexai=vertexai), model="gemini-2.5-flash"),
        **options,
    )


def test_gemini_developer_api_count_sends_only_the_contents() -> None:
    server = GeminiServer()

    result = ask(gemini(server))

    assert server.bodies == [{"contents": result.messages(style="gemini")["contents"]}]


def test_gemini_developer_api_count_estimates_the_system_instruction() -> None:
    server = GeminiServer(lambda body: 500)

    result = ask(gemini(server))

    estimate = get_tokenizer("estimate:gemini").count(result.prefix_text)
    report = result.report
    assert report.total == 500 + estimate
    assert (report.count_exact, report.count_margin) == (False, 0.1)
    assert report.count_method == "gemini count_tokens (contents) + estimate:gemini (system, tools)"


def test_gemini_developer_api_count_estimates_native_tool_schemas() -> None:
    server = GeminiServer(lambda body: 500)
    without = ask(gemini(GeminiServer(lambda body: 500), native_tools=True))

    result = ask(gemini(server, native_tools=True), tools=TOOLS)

    assert result.report.total > without.report.total
    assert "tools" not in server.bodies[0]


def test_gemini_vertex_count_sends_system_instruction_and_tools() -> None:
    server = GeminiServer(lambda body: 777)

    result = ask(gemini(server, vertexai=True, native_tools=True), tools=TOOLS)

    body = server.bodies[0]
    shaped = result.messages(style="gemini")
    assert body["contents"] == shaped["contents"]
    assert body["systemInstruction"] == shaped["config"]["system_instruction"]
    assert [t["name"] for t in body["tools"][0]["functionDeclarations"]] == ["lookup"]
    assert (result.report.total, result.report.count_exact) == (777, True)
    assert result.report.count_method == "gemini count_tokens"


@pytest.mark.parametrize(
    ("fail", "error"),
    [
        (
            httpx.Response(429, json={"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}}),
            "ClientError",
        ),
        (
            httpx.Response(403, json={"error": {"code": 403, "status": "PERMISSION_DENIED"}}),
            "ClientError",
        ),
        (httpx.ConnectError("refused"), "ConnectError"),
        (httpx.ReadTimeout("slow"), "ReadTimeout"),
    ],
)
def test_gemini_count_failing_falls_back(fail: httpx.Response | Exception, error: str) -> None:
    server = GeminiServer()
    server.fail = fail

    report = ask(gemini(server)).report

    assert report.count_method == "estimate:gemini"
    assert report.count_fallback is not None
    assert report.count_fallback.startswith(
        f"gemini count_tokens (contents) + estimate:gemini (system, tools) failed: {error}: "
    )


# --- the invariant -----------------------------------------------------------------------------


class Monotone:
    """A provider count of our own: a monotone function of the request's o200k count."""

    label = "monotone count"
    exact = True

    def __init__(self, factor: float, frame: int) -> None:
        self.factor, self.frame = factor, frame

    def count(self, prompt: Assembled) -> int:
        body = prompt.messages(style="anthropic")
        return self.frame + scaled(self.factor)(dict(body))


@given(
    factor=st.floats(min_value=0.25, max_value=6.0),
    frame=st.integers(min_value=0, max_value=1_600),
    n=st.integers(min_value=0, max_value=12),
)
def test_provider_count_of_the_final_prompt_is_within_the_budget_or_an_error(
    factor: float, frame: int, n: int
) -> None:
    provider = Monotone(factor, frame)
    a = ContextAssembler(tokenizer=MODEL, budget=budget(1_500), provider_count=provider)
    # The oracle: the prompt without a single source is all that cannot go (no floors); when
    # the provider counts it over, every prompt is over (the count is monotone).
    bare = ContextAssembler(tokenizer=MODEL, budget=budget(1_500)).assemble(
        system="Answer.", question="Why?"
    )
    if provider.count(bare) > bare.report.budget:
        with pytest.raises(ContextBudgetError):
            a.assemble(system="Answer.", question="Why?", chunks=chunks(n, words=30))
        return
    outcome: Assembled | ContextBudgetError
    try:
        outcome = a.assemble(system="Answer.", question="Why?", chunks=chunks(n, words=30))
    except ContextBudgetError as error:
        outcome = error
    if isinstance(outcome, ContextBudgetError):
        assert "after 4 counts" in str(outcome)  # the call bound ran out, said so
        return
    assert provider.count(outcome) == outcome.report.total <= outcome.report.budget


# --- imports -----------------------------------------------------------------------------------


def test_import_does_not_load_the_provider_sdks() -> None:
    heavy = ("anthropic", "boto3", "botocore", "google.genai", "httpx")

    assert loaded_after("import ctxbudget", heavy) == set()


# --- the Bedrock and Gemini message styles the counts send -------------------------------------

HISTORY = [
    Turn(role="assistant", content="Hello, how can I help?"),
    Turn(role="user", content="My order is late."),
    Turn(role="tool", content="order 42: shipped"),
]


def with_history() -> Assembled:
    return assembler(None, native_tools=True).assemble(
        system="Answer from the sources.",
        question="Why?",
        chunks=chunks(2),
        history=HISTORY,
        tools=TOOLS,
    )


def test_bedrock_style_validates_as_a_converse_request() -> None:
    result = with_history()
    request = {
        "modelId": "m",
        **result.messages(style="bedrock"),
        "toolConfig": {"tools": result.tool_schemas(style="bedrock")},
    }
    shape = bedrock_client().meta.service_model.operation_model("Converse").input_shape

    report = ParamValidator().validate(request, shape)

    assert not report.has_errors(), report.generate_report()


def test_bedrock_style_alternates_from_the_user_and_marks_the_cache_point() -> None:
    prompt = with_history().messages(style="bedrock")

    assert [m["role"] for m in prompt["messages"]] == ["user", "assistant", "user"]
    assert prompt["messages"][0]["content"][0] == {"text": CONVERSATION_START}
    assert prompt["messages"][2]["content"][1] == {"text": "Tool: order 42: shipped"}
    assert prompt.get("system", [])[-1] == {"cachePoint": {"type": "default"}}


def test_gemini_style_validates_as_google_genai_types() -> None:
    result = with_history()
    prompt = result.messages(style="gemini")

    for content in prompt["contents"]:
        genai_types.Content.model_validate(content)
    genai_types.GenerateContentConfig.model_validate(
        {
            **prompt["config"],
            "tools": [{"function_declarations": result.tool_schemas(style="gemini")}],
        }
    )


def test_gemini_style_names_the_assistant_model() -> None:
    prompt = with_history().messages(style="gemini")

    assert [c["role"] for c in prompt["contents"]] == ["user", "model", "user"]
    assert prompt["config"]["system_instruction"]["parts"][0]["text"].startswith("Answer from")


PARTS: dict[str, Callable[[ContextAssembler], object]] = {
    "select_sources": lambda a: a.select_sources(chunks(3)),
    "trim_history": lambda a: a.trim_history([Turn(role="user", content="Hi")]),
}


@pytest.mark.parametrize("part", sorted(PARTS))
def test_part_of_a_prompt_with_a_provider_count_is_refused(part: str) -> None:
    # The count measures the whole request; a part is sent inside a prompt it never sees.
    server = AnthropicServer()
    counted = assembler(AnthropicCount(server.client(), model=MODEL))
    with pytest.raises(InputError, match=rf"^{part} returns one part of a prompt, which the"):
        PARTS[part](counted)
    assert server.bodies == []
