"""The prompt builder keeps every prompt, of either style, within its token budget whatever
the run holds, and says what it cut; it masks known secrets in both styles."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hub.logs import ActionResultLog, InputLog, Log, OutputLog, ThoughtLog
from hub.models import ModelRequest
from hub.protocol import PromptBuilder, PromptParts, count_tokens
from hub.redact import MASK, Redactor

BUDGET = 900


def tokens(request: ModelRequest) -> int:
    return count_tokens(request.system) + sum(count_tokens(m["content"]) for m in request.messages)


texts = st.text(alphabet=st.sampled_from('ab &<>"é\n'), min_size=0, max_size=40).map(lambda s: s * 200)
entries = st.lists(
    st.one_of(
        texts.map(lambda t: InputLog(type="text", content=t, user="ann")),
        texts.map(lambda t: OutputLog(type="cli:message", content=t, sent=True)),
        texts.map(lambda t: ActionResultLog(call_id="c", name="look", ok=True, data={"text": t})),
        texts.map(lambda t: ThoughtLog(content=t)),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(run=entries, history=entries, episodes=st.lists(texts, max_size=5))
def test_no_prompt_of_either_style_exceeds_the_budget(run: list[Log], history: list[Log], episodes: list[str]) -> None:
    builder = PromptBuilder(budget=BUDGET)
    parts = PromptParts(persona_name="Hub", run=run, history=history, episodes=episodes)
    assert tokens(builder.build(parts)) <= BUDGET
    assert tokens(builder.build_chat(parts)) <= BUDGET


def test_an_oversized_input_is_cut_with_a_visible_marker_in_both_styles() -> None:
    builder = PromptBuilder(budget=BUDGET)
    parts = PromptParts(persona_name="Hub", run=[InputLog(type="text", content="question? " + "x" * 50_000)])
    for request in (builder.build(parts), builder.build_chat(parts)):
        content = request.messages[-1]["content"]
        assert content.count("question?") == 1  # the input is there, its start kept...
        assert "more characters cut]" in content  # ...and the cut is said
        assert tokens(request) <= BUDGET


def test_short_entries_stay_whole_while_a_long_one_is_cut_to_its_share() -> None:
    builder = PromptBuilder(budget=BUDGET)
    run: list[Log] = [
        InputLog(type="text", content="y" * 20_000),
        ActionResultLog(call_id="c", name="look", ok=True, data={"temp": 72}),
        InputLog(type="text", content="and the weather?"),
    ]
    content = builder.build(PromptParts(run=run)).messages[0]["content"]
    assert '{"temp": 72}' in content and "and the weather?" in content
    assert "more characters cut]" in content


def test_when_even_shares_cannot_fit_the_oldest_entries_of_the_run_give_way() -> None:
    builder = PromptBuilder(budget=BUDGET)
    run: list[Log] = [InputLog(type="text", content=f"message {i} " + "z" * 400) for i in range(200)]
    request = builder.build(PromptParts(run=run))
    content = request.messages[0]["content"]
    assert tokens(request) <= BUDGET
    assert "message 199" in content and "message 0 " not in content
    assert '<omitted entries="' in content


def test_known_secrets_are_masked_in_both_styles() -> None:
    secret = "sk-persona-0123456789"
    builder = PromptBuilder(budget=BUDGET, redactor=Redactor([secret]))
    parts = PromptParts(
        persona_name="Hub",
        persona_instructions=f"the key is {secret}",
        run=[InputLog(type="text", content=f"is it {secret}?")],
    )
    for request in (builder.build(parts), builder.build_chat(parts)):
        everything = request.system + "".join(m["content"] for m in request.messages)
        assert secret not in everything and MASK in everything


@settings(max_examples=60, deadline=None)
@given(history=entries, later=entries)
def test_history_lines_rendered_once_are_the_lines_rendered_fresh(history: list[Log], later: list[Log]) -> None:
    """A conversation's history is rendered once per entry and kept for the next turns: the
    prompt a warm builder makes is the one a new builder makes, turn after turn."""
    warm = PromptBuilder(budget=BUDGET)
    for turn in (history, history + later, (history + later)[-10:]):
        parts = PromptParts(persona_name="Hub", history=turn)
        assert warm.build(parts) == PromptBuilder(budget=BUDGET).build(parts)


def test_an_output_marked_sent_later_is_shown_as_it_is_now() -> None:
    out = OutputLog(type="cli:message", content="hello", sent=False)
    builder = PromptBuilder(budget=BUDGET)
    first = builder.build(PromptParts(persona_name="Hub", history=[out])).messages[0]["content"]
    assert 'sent="false"' in first
    out.sent = True
    again = builder.build(PromptParts(persona_name="Hub", history=[out])).messages[0]["content"]
    assert 'sent="false"' not in again and "hello" in again


def test_the_cache_of_history_lines_is_bounded(monkeypatch) -> None:
    import hub.protocol._prompt as prompt

    monkeypatch.setattr(prompt, "HISTORY_CACHE_CHARS", 2_000)
    builder = PromptBuilder(budget=BUDGET)
    for i in range(200):
        builder.build(PromptParts(persona_name="Hub", history=[InputLog(type="text", content=f"message {i} " * 5)]))
        assert builder._lines_chars <= 2_000
    assert 0 < len(builder._lines) < 200


# --- caches keyed by the objects themselves, never by a reused id() (issue 40, item 4) -------


def _rebuilt_tool(i: int):
    """An MCP-like action rebuilt on every re-list: a new object with its own name and schema."""
    from pydantic import create_model

    from hub import Action

    async def handler(args, ctx) -> None: ...

    schema = create_model(f"Args{i}", **{f"field_{i}": (int, ...)})
    return Action(name=f"tool_{i}", handler=handler, schema=schema, description=f"tool number {i}")


def test_an_action_rebuilt_at_a_reused_address_shows_its_own_name_and_schema() -> None:
    b = PromptBuilder(budget=100_000)
    for i in range(200):
        request = b.build(PromptParts(persona_name="Bot", actions=[_rebuilt_tool(i)]))
        block = request.system[request.system.index("<available_actions>") :]
        assert f'name="tool_{i}"' in block and f"field_{i}" in block, f"re-list {i} shows a stale tool"


def test_an_output_rebuilt_at_a_reused_address_shows_its_own_type() -> None:
    from hub import Output

    async def handler(content, ctx) -> None: ...

    b = PromptBuilder(budget=100_000)
    for i in range(200):
        o = Output(type=f"x:out{i}", handler=handler, description=f"output {i}")
        request = b.build(PromptParts(persona_name="Bot", outputs=[o]))
        assert f'type="x:out{i}"' in request.system and f"output {i}<" in request.system


def test_the_tools_style_rebuilds_tools_rebuilt_at_a_reused_address() -> None:
    from hub.protocol import ToolsPrompt

    tools = ToolsPrompt(PromptBuilder(budget=100_000))
    for i in range(200):
        request = tools.build(PromptParts(persona_name="Bot", actions=[_rebuilt_tool(i)]))
        (tool,) = request.tools
        assert tool["function"]["name"] == f"tool_{i}" and f"field_{i}" in str(tool)
