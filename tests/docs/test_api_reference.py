"""The API reference (docs/reference/) renders the whole public surface, documented.

- every name in the ``__all__`` of ``hub``, ``hub.platform`` and ``hub.testing`` (the lazily
  imported ones too) has its own ``::: module.Name`` entry on a reference page, and a docstring
  of its own: not empty, not inherited, not the one ``dataclass`` writes;
- the public methods and attributes of each of those classes are documented: a docstring of
  their own, a line in the class's ``Attributes:`` section (a field), or the docstring of the
  method it overrides;
- no docstring in ``hub`` or an extension holds a Sphinx role (``:func:`x```), which
  mkdocstrings shows as raw text: they are ``[`x`][hub.x]`` cross-references;
- the error tree on errors.md is the classes' own hierarchy.

Docstrings are read as the site reads them, by griffe from the source (``inspect.getdoc``
would find an inherited one).
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import griffe
import pytest

from tests.docs.test_code_blocks import ROOT

PUBLIC = ("hub", "hub.platform", "hub.testing")
PAGES = ROOT / "docs" / "reference"
DIRECTIVE = re.compile(r"^::: ([\w.]+)\s*$", re.M)
ROLE = re.compile(r":(func|class|meth|attr|data|mod|exc|obj|const):`")


@cache
def package() -> griffe.Module:
    loader = griffe.GriffeLoader(search_paths=[str(ROOT)], docstring_parser=griffe.Parser.google)
    hub = loader.load("hub")
    loader.resolve_aliases(implicit=False, external=None)
    assert isinstance(hub, griffe.Module)
    return hub


def griffe_object(path: str) -> griffe.Object:
    obj = package()[path.removeprefix("hub.")]
    return obj.final_target if isinstance(obj, griffe.Alias) else obj


def rendered() -> dict[str, str]:
    """Each ``::: path`` on a reference page, with the page it is on."""
    out: dict[str, str] = {}
    for page in sorted(PAGES.glob("*.md")):
        for path in DIRECTIVE.findall(page.read_text()):
            out.setdefault(path, page.name)
    return out


def public_names() -> list[str]:
    return [f"{module}.{name}" for module in PUBLIC for name in importlib.import_module(module).__all__]


def own_docstring(path: str) -> str:
    """The docstring the site shows for ``path``, or "" (griffe reads the source: nothing inherited)."""
    doc = griffe_object(path).docstring
    return doc.value.strip() if doc else ""


@pytest.mark.parametrize("path", public_names())
def test_a_public_name_is_rendered_with_a_docstring(path: str) -> None:
    module, name = path.rsplit(".", 1)
    assert path in rendered(), f"{path} has no `::: {path}` entry on a page under docs/reference/"
    obj = getattr(importlib.import_module(module), name)  # the lazily imported ones load here
    doc = own_docstring(path)
    assert doc, f"{path} has no docstring of its own"
    if inspect.isclass(obj) or inspect.isroutine(obj):
        assert inspect.getdoc(obj), path
    assert not doc.startswith(f"{name}("), f"{path}: the docstring is the one dataclass writes"
    assert len(doc.split()) >= 4, f"{path}: {doc!r} says too little"


def test_every_entry_on_a_reference_page_names_something_real() -> None:
    for path, page in rendered().items():
        try:
            griffe_object(path)
        except KeyError:
            pytest.fail(f"{page}: `::: {path}` names nothing")
    # one entry per name, in the order of use: a whole public module would be dumped in its own order
    assert not set(PUBLIC) & set(rendered()), "render the names of a public module one by one"


def documented_fields(cls: griffe.Object) -> set[str]:
    """The names an ``Attributes:`` section of the class's docstring describes."""
    out: set[str] = set()
    if cls.docstring is None:
        return out
    for section in cls.docstring.parsed:
        if section.kind is griffe.DocstringSectionKind.attributes:
            out |= {attr.name for attr in section.value}
    return out


def public_members(path: str) -> Iterator[tuple[str, griffe.Object]]:
    cls = griffe_object(path)
    listed = hub_members() if path == "hub.Hub" else None
    for name, member in cls.members.items():
        if name.startswith("_") or (listed is not None and name not in listed):
            continue
        if name == "model_config":  # pydantic's settings of the model, not a field
            continue
        yield name, member.final_target if isinstance(member, griffe.Alias) else member


def hub_members() -> list[str]:
    """The members of ``Hub`` its page lists: the public ones; the rest are the hub's internals."""
    text = (PAGES / "hub.md").read_text()
    block = text.split("::: hub.Hub\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^        - (\w+)$", block, re.M)


def public_classes() -> list[str]:
    out = []
    for path in public_names():
        module, name = path.rsplit(".", 1)
        if inspect.isclass(getattr(importlib.import_module(module), name)):
            out.append(path)
    return out


def inherited_doc(path: str, name: str) -> bool:
    """Whether ``name`` overrides a method a base class documents (``InMemoryStore.get``)."""
    module, cls_name = path.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), cls_name)
    return any(name in vars(base) and inspect.getdoc(vars(base)[name]) for base in cls.__mro__[1:])


@pytest.mark.parametrize("path", public_classes())
def test_the_members_of_a_public_class_are_documented(path: str) -> None:
    fields = documented_fields(griffe_object(path))
    missing = []
    for name, member in public_members(path):
        if member.docstring and member.docstring.value.strip():
            continue
        if member.is_attribute and name in fields:
            continue
        if member.is_function and inherited_doc(path, name):
            continue
        missing.append(name)
    assert not missing, f"{path}: undocumented public members {missing}"


def test_the_main_classes_are_among_those_checked() -> None:
    checked = set(public_classes())
    for path in ("hub.Hub", "hub.HubConfig", "hub.Model", "hub.RunState", "hub.platform.PlatformSettings"):
        assert path in checked


def test_every_member_the_hub_page_lists_exists() -> None:
    listed = hub_members()
    assert {"start", "stop", "send", "submit", "events", "config"} <= set(listed)
    hub = griffe_object("hub.Hub")
    assert not [name for name in listed if name not in hub.members]
    # the rest are the hub's internals (its stores, engine, intake...), left off the page; one
    # given a docstring is meant for readers, and goes on the list
    documented = [n for n, m in hub.members.items() if not n.startswith("_") and m.docstring]
    assert not [name for name in documented if name not in listed]


def docstrings(obj: griffe.Object | griffe.Alias) -> Iterator[tuple[str, str]]:
    """(path, docstring) of ``obj`` and of everything defined in it."""
    if isinstance(obj, griffe.Alias):
        return
    if obj.docstring:
        yield obj.path, obj.docstring.value
    for member in obj.members.values():
        yield from docstrings(member)


def extension_packages() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "extensions").glob("*/hub_*/__init__.py"))


def test_no_docstring_holds_a_sphinx_role() -> None:
    found = [path for path, doc in docstrings(package()) if ROLE.search(doc)]
    for folder in extension_packages():
        loader = griffe.GriffeLoader(search_paths=[str(folder.parent)])
        found += [path for path, doc in docstrings(loader.load(folder.name)) if ROLE.search(doc)]
    assert len(extension_packages()) >= 10
    found += [page.name for page in PAGES.glob("*.md") if ROLE.search(page.read_text())]
    assert not found, f"Sphinx roles show as raw text on the site; use [`Name`][hub.Name]: {found}"


def test_a_role_is_found_where_there_is_one(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text('class A:\n    def f(self):\n        """See :meth:`A.g`."""\n')
    module = griffe.GriffeLoader(search_paths=[str(tmp_path)]).load("pkg")
    assert [path for path, doc in docstrings(module) if ROLE.search(doc)] == ["pkg.A.f"]


def error_tree() -> dict[str, str]:
    """``{class name: parent name}`` from the tree drawn on errors.md."""
    text = (PAGES / "errors.md").read_text()
    block = text.split("<!-- error-tree -->\n```text\n", 1)[1].split("```", 1)[0]
    parents: dict[str, str] = {}
    stack: list[str] = []
    for line in block.splitlines():
        name = re.sub(r"^[│├└─ ]*", "", line).strip()
        depth = (len(line) - len(line.lstrip("│├└─ "))) // 4
        del stack[depth:]
        if stack:
            parents[name.removeprefix("platform.")] = stack[-1].removeprefix("platform.")
        stack.append(name)
    return parents


def test_the_error_tree_is_the_classes_hierarchy() -> None:
    import hub
    import hub.platform

    errors = {
        name: getattr(module, name)
        for module in (hub, hub.platform)
        for name in module.__all__
        if inspect.isclass(getattr(module, name)) and issubclass(getattr(module, name), BaseException)
    }
    tree = error_tree()
    assert set(tree) == set(errors), "the tree on errors.md names exactly the public errors"
    for name, cls in errors.items():
        assert cls.__bases__[0].__name__ == tree[name], f"{name} derives from {cls.__bases__[0].__name__}"
