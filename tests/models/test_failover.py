"""Failover between named models and key pools, with the real openai client against two
loopback fakes: each way a model fails sends the request to the next one, the failing one
is skipped while its circuit is open (or its key rests), and used again once it is back.
The breakers' clock is the test's: no sleep, no wall-clock wait (but the client's own
timeout, for the model that hangs)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from hub import HubConfig, ModelError, ModelRequest, Usage
from hub._compose import make_model
from hub.models.failover import FailoverModel
from hub.testing import FakeOpenAI, closed_port

REQ = ModelRequest(system="sys", messages=[{"role": "user", "content": "hello"}])


class Clock:
    """Monotonic seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def two_models(primary_url: str, backup_url: str, *, keys: list[str] | None = None, **primary: Any) -> HubConfig:
    return HubConfig.model_validate(
        {
            "model": {
                "provider": "openai",
                "name": "primary-llm",
                "base_url": primary_url,
                "api_key": "sk-primary-0001",
                "fallbacks": ["backup"],
                "circuit_failures": 1,
                "circuit_cooldown": 60,
                **({"api_keys": keys} if keys else {}),
                **primary,
            },
            "models": {
                "backup": {
                    "provider": "openai",
                    "name": "backup-llm",
                    "base_url": backup_url,
                    "api_key": "sk-backup-01",
                }
            },
        }
    )


async def answer(model: Any, request: ModelRequest = REQ) -> tuple[str, Usage]:
    text, usage = [], None
    async for c in model.stream(request):
        if isinstance(c, Usage):
            usage = c
        elif isinstance(c, str):
            text.append(c)
    assert usage is not None
    return "".join(text), usage


def fail(fake: FakeOpenAI, fault: str) -> None:
    """Script ``fault`` for the next request to ``fake``."""
    if fault == "500":
        fake.fail_next("chat", status=500)
    elif fault == "429":
        fake.fail_next("chat", status=429, retry_after=3600)
    elif fault == "401":
        fake.fail_next("chat", status=401, retry_after=None)
    elif fault == "hang":
        fake.hang_next()


FAULTS = ["500", "429", "hang", "refused", "401"]


@pytest.mark.parametrize("fault", FAULTS)
async def test_the_next_model_answers_and_the_failing_one_is_skipped_until_it_is_back(fault: str) -> None:
    clock = Clock()
    seen: list[tuple[str, str]] = []
    # "refused": nothing listens at the primary's port until it comes back
    primary = FakeOpenAI(default="from primary", port=closed_port() if fault == "refused" else 0)
    async with FakeOpenAI(default="from backup") as backup:
        if fault != "refused":
            await primary.start()
        config = two_models(f"http://127.0.0.1:{primary.port}/v1", backup.url, timeout=0.3 if fault == "hang" else 60)
        model = make_model(config, clock=clock, observe=lambda m, o: seen.append((m, o)))
        assert isinstance(model, FailoverModel)
        try:
            fail(primary, fault)
            text, usage = await answer(model)
            assert (text, usage.model) == ("from backup", "backup")
            tried = len(primary.requests)
            assert tried == (0 if fault == "refused" else 1)

            # skipped while its circuit is open (or its only key rests): no request reaches it
            text, usage = await answer(model)
            assert (text, usage.model) == ("from backup", "backup")
            assert len(primary.requests) == tried
            assert "model" in model.problems()

            clock.now += 3601  # past the cooldown and the Retry-After
            if fault == "refused":
                await primary.start()  # the server is back, at the same address
            text, usage = await answer(model)
            if fault == "401":  # a refused key rests until restart, whatever the time
                assert (text, usage.model) == ("from backup", "backup")
                assert len(primary.requests) == tried
                assert "key 1 of 1 refused" in model.problems()["model"]
            else:
                assert (text, usage.model) == ("from primary", "model")
                assert model.problems() == {}
        finally:
            await model.close()
            await primary.stop()
    expected = {
        "500": "server_error",
        "429": "rate_limited",
        "hang": "unreachable",
        "refused": "unreachable",
        "401": "key_refused",
    }
    assert seen[:3] == [("model", expected[fault]), ("backup", "ok"), ("model", "skipped")]


async def test_a_recovered_model_closes_its_circuit_after_one_trial_and_a_failed_trial_opens_it_again() -> None:
    clock = Clock()
    async with FakeOpenAI(default="from primary") as primary, FakeOpenAI(default="from backup") as backup:
        model = make_model(two_models(primary.url, backup.url), clock=clock)
        try:
            primary.fail_next("chat", status=503, count=2)
            assert (await answer(model))[1].model == "backup"  # opens (circuit_failures = 1)
            clock.now += 61
            assert (await answer(model))[1].model == "backup"  # the half-open trial fails: open again
            assert len(primary.requests) == 2
            clock.now += 30
            assert (await answer(model))[1].model == "backup"  # still cooling down from the trial
            assert len(primary.requests) == 2
            clock.now += 31
            assert (await answer(model))[1].model == "model"  # the next trial works: closed
            assert (await answer(model))[1].model == "model"
        finally:
            await model.close()


async def test_keys_are_used_in_turn_and_a_rate_limited_key_rests_for_its_retry_after(caplog) -> None:
    clock = Clock()
    keys = ["sk-pool-key-A-000001", "sk-pool-key-B-000002", "sk-pool-key-C-000003"]
    async with FakeOpenAI(default="ok") as primary, FakeOpenAI(default="from backup") as backup:
        config = two_models(primary.url, backup.url, keys=keys)
        config.model.api_key = ""
        model = make_model(config, clock=clock)
        try:
            for _ in range(3):
                await answer(model)
            used = [r.headers["Authorization"].removeprefix("Bearer ") for r in primary.requests]
            assert used == keys  # in turn

            primary.fail_next("chat", status=429, retry_after=120)
            text, usage = await answer(model)  # key A rests; key B answers, no wait
            assert (text, usage.model) == ("ok", "model")
            for _ in range(4):
                await answer(model)
            recent = [r.headers["Authorization"].removeprefix("Bearer ") for r in primary.requests[3:]]
            assert recent[0] == keys[0] and keys[0] not in recent[1:]  # resting
            clock.now += 121
            for _ in range(3):
                await answer(model)
            back = [r.headers["Authorization"].removeprefix("Bearer ") for r in primary.requests[-3:]]
            assert keys[0] in back
            assert backup.requests == []  # some key could always answer
        finally:
            await model.close()


async def test_a_refused_key_rests_until_restart_and_is_named_by_its_position(caplog) -> None:
    clock = Clock()
    keys = ["sk-pool-key-A-000001", "sk-pool-key-B-000002"]
    caplog.set_level(logging.INFO)
    async with FakeOpenAI(default="ok") as primary, FakeOpenAI(default="from backup") as backup:
        config = two_models(primary.url, backup.url, keys=keys)
        config.model.api_key = ""
        model = make_model(config, clock=clock)
        try:
            primary.fail_next("chat", status=401, retry_after=None)
            text, usage = await answer(model)  # key 1 refused: key 2 answers, in the same call
            assert (text, usage.model) == ("ok", "model")
            clock.now += 10 * 86400
            for _ in range(4):
                await answer(model)
        finally:
            await model.close()
    used = [r.headers["Authorization"].removeprefix("Bearer ") for r in primary.requests]
    assert used == [keys[0], keys[1], keys[1], keys[1], keys[1], keys[1]]
    assert backup.requests == []
    assert "[model]: key 1 of 2 was refused (HTTP 401): it is not used again until restart" in caplog.text
    assert not any(k in caplog.text for k in keys)


async def test_every_model_failing_is_one_error_that_names_each_and_no_key() -> None:
    async with FakeOpenAI() as primary, FakeOpenAI() as backup:
        config = two_models(primary.url, backup.url)
        model = make_model(config, clock=Clock())
        try:
            primary.fail_next("chat", status=500)
            backup.fail_next("chat", status=401, retry_after=None)
            with pytest.raises(ModelError) as info:
                await answer(model)
        finally:
            await model.close()
    text = str(info.value)
    assert "[model]: HTTP 500" in text and "[models.backup]: key 1 of 1 refused" in text
    assert "sk-backup-01" not in text and "[key 1]" in text
    assert info.value.retryable  # the primary may answer later: the engine's bounded policy decides


async def test_a_request_the_model_refuses_as_bad_is_not_sent_elsewhere() -> None:
    """A 400 (a bad request, a context too long) is the request's fault: raised as it is,
    for the layers above (compaction), and the next model is not asked."""
    async with FakeOpenAI() as primary, FakeOpenAI(default="from backup") as backup:
        model = make_model(two_models(primary.url, backup.url), clock=Clock())
        try:
            primary.fail_next("chat", status=400, description="This model's maximum context length is 8192 tokens")
            with pytest.raises(ModelError) as info:
                await answer(model)
        finally:
            await model.close()
    assert info.value.status == 400 and "maximum context length" in str(info.value)
    assert backup.requests == []


def test_a_context_too_long_is_never_a_reason_to_fail_over_whatever_its_status() -> None:
    from hub.errors import ContextTooLong
    from hub.models.failover import failover_kind

    for status in (None, 400, 413, 500):
        assert failover_kind(ContextTooLong("maximum context length is 8192", status=status)) is None
