"""Which principal a call is answered for, on every path a LangChain call can take.

The core's one rule (`ctxbudget.principal_for_call`): a component built for a principal
serves it only and refuses a call naming anyone else (None included); one built without
takes each call's ``config["configurable"]["principal"]``, and a call that names nobody
sees unrestricted documents only. A principal given for a call is never replaced by
another one: not by a constructor default, not by an enclosing run's config.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, get_args

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.documents import Document
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from pydantic import ValidationError

from ctxbudget import AccessPolicy, ContextAssembler, InputError, Principal, SourceOptions
from langchain_ctxbudget import (
    ContextBudgetCompressor,
    ContextBudgetRetriever,
    ContextBudgetRunnable,
    ContextBudgetTransformer,
)
from tests.support.langchain_stack import RecordingChatModel, small_budget, vector_retriever

ACME = Principal(tenant="acme")
GLOBEX = Principal(tenant="globex")
QUESTION = "How long do refunds take?"
DOCUMENTS = [
    Document("Refunds are paid within 5 business days.", id="public"),
    Document(
        "Acme only: refunds over 800 EUR need a manager.", id="acme", metadata={"tenant": "acme"}
    ),
    Document("Globex only: refunds take 60 days.", id="globex", metadata={"tenant": "globex"}),
]

How = Literal[
    "invoke", "ainvoke", "with_config", "batch", "abatch", "stream", "astream", "chain", "thread"
]
HOWS: tuple[How, ...] = get_args(How)


def config_for(principal: Principal | None) -> RunnableConfig:
    return {"configurable": {"principal": principal}}


async def _astream(runnable: Runnable[Any, Any], value: Any, config: RunnableConfig) -> list[Any]:
    return [chunk async for chunk in runnable.astream(value, config)]


def called(how: How, runnable: Runnable[Any, Any], value: Any, config: RunnableConfig) -> Any:
    """`runnable` run on `value` with `config` the way `how` says."""
    if how == "invoke":
        return runnable.invoke(value, config)
    if how == "ainvoke":
        return asyncio.run(runnable.ainvoke(value, config))
    if how == "with_config":
        return runnable.with_config(config).invoke(value)
    if how == "batch":
        return runnable.batch([value, value], [config, config])[1]
    if how == "abatch":
        return asyncio.run(runnable.abatch([value, value], [config, config]))[1]
    if how == "stream":
        return list(runnable.stream(value, config))[-1]
    if how == "astream":
        return asyncio.run(_astream(runnable, value, config))[-1]
    if how == "chain":
        return (RunnableLambda(lambda v: v) | runnable).invoke(value, config)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(runnable.invoke, value, config).result()


def shown(output: Any) -> set[str]:
    """Which of DOCUMENTS an output shows: a context string or cited documents."""
    text = output if isinstance(output, str) else "\n".join(d.page_content for d in output)
    return {str(d.id) for d in DOCUMENTS if d.page_content in text}


@pytest.fixture
def assembler() -> ContextAssembler:
    return ContextAssembler(tokenizer="gpt-4o", budget=small_budget(retrieved=1_000))


# --- ContextBudgetRunnable and ContextBudgetRetriever: per call, or fixed --------------------

Component = Callable[[ContextAssembler, Principal | None], tuple[Runnable[Any, Any], Any]]
"""A component built for a principal (or None), and the input it takes."""


def runnable(
    assembler: ContextAssembler, principal: Principal | None
) -> tuple[Runnable[Any, Any], Any]:
    return ContextBudgetRunnable(assembler=assembler, principal=principal), DOCUMENTS


def retriever(
    assembler: ContextAssembler, principal: Principal | None
) -> tuple[Runnable[Any, Any], Any]:
    budgeted = ContextBudgetRetriever(
        retriever=vector_retriever(DOCUMENTS), assembler=assembler, principal=principal
    )
    return budgeted, QUESTION


COMPONENTS: dict[str, Component] = {"runnable": runnable, "retriever": retriever}


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("component", COMPONENTS)
def test_call_principal_reaches_the_selection_on_every_path(
    component: str, how: How, assembler: ContextAssembler
) -> None:
    built, value = COMPONENTS[component](assembler, None)
    assert shown(called(how, built, value, config_for(GLOBEX))) == {"public", "globex"}


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("component", COMPONENTS)
def test_call_naming_nobody_sees_public_documents_only(
    component: str, how: How, assembler: ContextAssembler
) -> None:
    built, value = COMPONENTS[component](assembler, None)
    assert shown(called(how, built, value, {})) == {"public"}


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("component", COMPONENTS)
def test_fixed_principal_refuses_a_call_naming_another(
    component: str, how: How, assembler: ContextAssembler
) -> None:
    built, value = COMPONENTS[component](assembler, ACME)
    with pytest.raises(
        InputError, match=r"names Principal\(tenant='globex'.*built for Principal\(tenant='acme'"
    ):
        called(how, built, value, config_for(GLOBEX))


@pytest.mark.parametrize("component", COMPONENTS)
def test_fixed_principal_refuses_a_call_naming_the_anonymous_caller(
    component: str, assembler: ContextAssembler
) -> None:
    built, value = COMPONENTS[component](assembler, ACME)
    with pytest.raises(InputError, match=r"names None, but this component was built for"):
        built.invoke(value, config_for(None))


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("component", COMPONENTS)
def test_fixed_principal_serves_a_call_naming_nobody(
    component: str, how: How, assembler: ContextAssembler
) -> None:
    built, value = COMPONENTS[component](assembler, ACME)
    assert shown(called(how, built, value, {})) == {"public", "acme"}


@pytest.mark.parametrize("component", COMPONENTS)
def test_fixed_principal_serves_a_call_naming_it_as_a_mapping(
    component: str, assembler: ContextAssembler
) -> None:
    built, value = COMPONENTS[component](assembler, ACME)
    config: Any = {"configurable": {"principal": {"tenant": "acme"}}}
    assert shown(built.invoke(value, config)) == {"public", "acme"}


@pytest.mark.parametrize("component", COMPONENTS)
def test_call_inside_another_run_keeps_its_own_principal(
    component: str, assembler: ContextAssembler
) -> None:
    built, value = COMPONENTS[component](assembler, None)
    inner = RunnableLambda(lambda _: built.invoke(value, config_for(GLOBEX)))
    assert shown(inner.invoke(QUESTION, config_for(ACME))) == {"public", "globex"}


@pytest.mark.parametrize("component", COMPONENTS)
def test_call_in_a_plain_thread_that_lost_the_run_sees_public_documents_only(
    component: str, assembler: ContextAssembler
) -> None:
    built, value = COMPONENTS[component](assembler, None)
    outputs: list[Any] = []

    def step(_: str) -> None:
        # The run's config lives in a context variable, which a new thread does not inherit.
        worker = threading.Thread(target=lambda: outputs.append(built.invoke(value)))
        worker.start()
        worker.join()

    RunnableLambda(step).invoke(QUESTION, config_for(ACME))
    assert shown(outputs[0]) == {"public"}


@pytest.mark.parametrize("component", COMPONENTS)
def test_required_principal_refuses_a_call_naming_nobody(component: str) -> None:
    assembler = ContextAssembler(
        tokenizer="gpt-4o",
        budget=small_budget(retrieved=1_000),
        sources=SourceOptions(access=AccessPolicy(require_principal=True)),
    )
    built, value = COMPONENTS[component](assembler, None)
    with pytest.raises(InputError, match=r"no principal was given, and the access policy requires"):
        built.invoke(value)


def test_runnable_dict_input_takes_the_call_principal(assembler: ContextAssembler) -> None:
    ctx = ContextBudgetRunnable(assembler=assembler)
    value = ctx.invoke({"question": QUESTION, "documents": DOCUMENTS}, config_for(GLOBEX))
    assert isinstance(value, ChatPromptValue)
    assert shown(value.to_string()) == {"public", "globex"}


def test_runnable_for_model_principal_is_fixed(assembler: ContextAssembler) -> None:
    model = RecordingChatModel(profile={"max_input_tokens": 128_000})
    ctx = ContextBudgetRunnable.for_model(model, reserve_output=1_000, principal=ACME)
    with pytest.raises(InputError, match=r"built for Principal\(tenant='acme'"):
        ctx.invoke(DOCUMENTS, config_for(GLOBEX))


# --- ContextBudgetTransformer: principal= per call, or fixed --------------------------------


def test_transformer_call_principal_is_used(assembler: ContextAssembler) -> None:
    transformer = ContextBudgetTransformer(assembler)
    assert shown(transformer.transform_documents(DOCUMENTS, principal=GLOBEX)) == {
        "public",
        "globex",
    }


def test_transformer_call_naming_nobody_sees_public_documents_only(
    assembler: ContextAssembler,
) -> None:
    assert shown(ContextBudgetTransformer(assembler).transform_documents(DOCUMENTS)) == {"public"}


def test_transformer_async_call_principal_is_used(assembler: ContextAssembler) -> None:
    transformer = ContextBudgetTransformer(assembler)
    documents = asyncio.run(
        transformer.atransform_documents(DOCUMENTS, principal={"tenant": "globex"})
    )
    assert shown(documents) == {"public", "globex"}


def test_transformer_fixed_principal_refuses_a_call_naming_another(
    assembler: ContextAssembler,
) -> None:
    transformer = ContextBudgetTransformer(assembler, principal=ACME)
    with pytest.raises(InputError, match=r"principal= names Principal\(tenant='globex'"):
        transformer.transform_documents(DOCUMENTS, principal=GLOBEX)


def test_transformer_fixed_principal_refuses_the_anonymous_caller(
    assembler: ContextAssembler,
) -> None:
    transformer = ContextBudgetTransformer(assembler, principal=ACME)
    with pytest.raises(InputError, match=r"principal= names None"):
        transformer.transform_documents(DOCUMENTS, principal=None)


def test_transformer_fixed_principal_serves_a_call_naming_nobody(
    assembler: ContextAssembler,
) -> None:
    transformer = ContextBudgetTransformer(assembler, principal=ACME)
    assert shown(transformer.transform_documents(DOCUMENTS)) == {"public", "acme"}


# --- ContextBudgetCompressor: it cannot see the call, so it answers for nobody --------------


def compression(assembler: ContextAssembler) -> ContextualCompressionRetriever:
    return ContextualCompressionRetriever(
        base_compressor=ContextBudgetCompressor(assembler=assembler),
        base_retriever=vector_retriever(DOCUMENTS),
    )


def test_compressor_takes_no_principal(assembler: ContextAssembler) -> None:
    with pytest.raises(
        ValidationError, match=r"ContextBudgetCompressor takes no principal.*ContextBudgetRetriever"
    ):
        ContextBudgetCompressor(assembler=assembler, principal=ACME)  # type: ignore[call-arg]


@pytest.mark.parametrize("how", HOWS)
def test_compressor_never_shows_a_call_restricted_documents(
    how: How, assembler: ContextAssembler, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        output = called(how, compression(assembler), QUESTION, config_for(GLOBEX))
    assert shown(output) == {"public"}
    assert any("use ContextBudgetRetriever" in r.getMessage() for r in caplog.records)


def test_compressor_inside_a_run_of_another_principal_shows_it_nothing_restricted(
    assembler: ContextAssembler,
) -> None:
    # The enclosing run's config is what the compressor would find in the context: acme's,
    # while the call it serves was made for globex.
    ccr = compression(assembler)

    def for_globex(question: str) -> list[Document]:
        return ccr.invoke(question, config_for(GLOBEX))

    inner = RunnableLambda(for_globex)
    assert shown(inner.invoke(QUESTION, config_for(ACME))) == {"public"}


def test_compressor_with_a_required_principal_is_an_error(assembler: ContextAssembler) -> None:
    required = ContextAssembler(
        tokenizer="gpt-4o", sources=SourceOptions(access=AccessPolicy(require_principal=True))
    )
    with pytest.raises(
        InputError, match=r"requires a principal .* ContextBudgetCompressor answers for none"
    ):
        compression(required).invoke(QUESTION)
