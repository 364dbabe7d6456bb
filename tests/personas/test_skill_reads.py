"""Issue 40, finding 19: ``load_skill`` read its file whole on the event loop and walked the
skill's tree on every call. Now the tree is indexed when a skill is loaded (and again when a
folder of it changes), and a file is read in a worker thread, at most what the model can get.

Both are observed from outside: Python's audit events (``open``, ``os.scandir``) name each file
opened and each folder listed, and the thread that did it; ``tracemalloc`` sees what a read holds.
"""

from __future__ import annotations

import sys
import threading
import tracemalloc
from pathlib import Path

from hub import ActionResultLog
from hub.personas import SkillSet

from .test_skills import CLI, write

_seen: list[tuple[str, str, int]] = []  # (event, path, thread id) while a test listens
_listening: list[Path] = []


def _audit(event: str, args: tuple) -> None:
    if not _listening or event not in ("open", "os.scandir", "os.listdir"):
        return
    path = args[0] if args else None
    if isinstance(path, (str, Path)) and str(path).startswith(str(_listening[0])):
        _seen.append((event, str(path), threading.get_ident()))


sys.addaudithook(_audit)  # a hook cannot be removed: it does nothing unless a test listens


async def test_load_skill_neither_walks_the_tree_nor_reads_on_the_event_loop(make_hub, config, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write(root, "invoices")
    (root / "invoices" / "docs").mkdir()
    (root / "invoices" / "docs" / "template.txt").write_text("INVOICE #{n}")
    config.agent.skills_dir = str(root)
    load = '<action_call name="load_skill">{"name": "invoices", "file": "docs/template.txt"}</action_call>'
    whole = '<action_call name="load_skill">{"name": "invoices"}</action_call>'
    model = [f"<response>{whole}{load}{load}{load}</response>", "<response><output>done</output></response>"]
    async with make_hub(model) as hub:
        loop_thread = threading.get_ident()
        _seen.clear()
        _listening.append(root)
        try:
            result = await hub.send(*CLI, "bill them")
        finally:
            _listening.clear()
    instructions, *loads = [e for e in result.logs if isinstance(e, ActionResultLog)]
    assert instructions.data["files"] == ["docs/template.txt"]
    assert [r.data["content"] for r in loads] == ["INVOICE #{n}"] * 3
    on_the_loop = [e for e in _seen if e[2] == loop_thread]
    assert on_the_loop == [], "nothing of the skills is opened or listed on the event loop"
    walked = [e for e in _seen if e[0] != "open" and e[1].startswith(str(root / "invoices"))]
    assert walked == [], "the skill's tree is not walked again for a load"
    assert len([e for e in _seen if e[0] == "open" and e[1].endswith("template.txt")]) == 3


def test_a_huge_skill_file_is_read_only_as_far_as_the_model_gets_it(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write(root, "invoices")
    (root / "invoices" / "big.txt").write_bytes(b"y" * 20_000_000)
    skills = SkillSet(root)
    skills.refresh()
    tracemalloc.start()
    try:
        content = skills.read("invoices", "big.txt")["content"]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert content.startswith("y" * 1000) and content.endswith("[... cut: the file has 20000000 bytes]")
    assert peak < 8_000_000, f"{peak} bytes held to read a 20 MB file"  # the cap and the scan of it, not the file
