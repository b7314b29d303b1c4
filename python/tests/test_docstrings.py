"""Docs for every public item: each name of ``ferroloop.__all__`` and each public method and
property of its classes has a non-empty docstring, as a user sees it in an editor. Three views:
the runtime ``__doc__`` (Python classes from their docstrings, native ones from the Rust ``///``
comments in ``python/src`` through PyO3), the stub ``_native.pyi`` (what a type checker's hover
shows for the native names), and the ``#:`` comment of each type alias (a ``Union`` or
``Literal`` has no docstring of its own)."""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path
from typing import Any, Iterator

PACKAGE = Path(__file__).resolve().parents[1] / "ferroloop"


def _init_tree() -> ast.Module:
    return ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))


def _public_names() -> list[str]:
    """``__all__`` as ``__init__.py`` writes it (read from the source, no import needed)."""
    for node in _init_tree().body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return [ast.literal_eval(element) for element in node.value.elts]  # type: ignore[attr-defined]
    raise AssertionError("ferroloop/__init__.py has no __all__")


def _modules_of() -> dict[str, str]:
    """Public name → the private module ``__init__.py`` imports it from (``_native``, ...)."""
    out: dict[str, str] = {}
    for node in _init_tree().body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                out[alias.asname or alias.name] = node.module
    return out


def _is_alias(obj: Any) -> bool:
    """A typing construct (``Union[...]``, ``Literal[...]``): documented by a ``#:`` comment."""
    return typing.get_origin(obj) is not None


def _is_typeddict(obj: Any) -> bool:
    """A ``TypedDict`` class (``typing.is_typeddict`` is 3.10+; the package supports 3.9)."""
    return isinstance(obj, type) and issubclass(obj, dict) and hasattr(obj, "__total__")


def _member_doc(value: Any) -> Any:
    """The docstring of a class attribute that is a method or property, else ``...`` (plain
    data, which carries no docstring)."""
    if isinstance(value, property):
        return value.__doc__ or (value.fget.__doc__ if value.fget else None)
    if isinstance(value, (staticmethod, classmethod)):
        return value.__func__.__doc__
    if inspect.isfunction(value) or inspect.ismethoddescriptor(value) or inspect.isdatadescriptor(value):
        return value.__doc__
    if inspect.isbuiltin(value) or inspect.isroutine(value):
        return value.__doc__
    return ...


def _runtime_items() -> Iterator[tuple[str, Any]]:
    """``(label, docstring)`` of each public name and each public member of its classes."""
    import ferroloop

    for name in ferroloop.__all__:
        obj = getattr(ferroloop, name)
        if name == "__version__" or _is_alias(obj):
            continue  # a str; an alias (see test_type_aliases_have_doc_comments)
        if inspect.isclass(obj):
            yield name, obj.__dict__.get("__doc__")
            if _is_typeddict(obj):
                continue  # its keys are documented in its docstring
            seen: set[str] = set()
            for owner in obj.__mro__:
                if not owner.__module__.startswith("ferroloop"):
                    continue  # Exception's, object's members are not ours to document
                for member, value in vars(owner).items():
                    if member.startswith("_") or member in seen:
                        continue
                    seen.add(member)
                    doc = _member_doc(value)
                    if doc is not ...:
                        yield f"{name}.{member}", doc
        else:
            yield name, getattr(obj, "__doc__", None)


def test_public_names_and_members_have_docstrings() -> None:
    items = list(_runtime_items())
    assert len(items) > 100, f"only {len(items)} items found: does the walk still reach the classes?"
    missing = [label for label, doc in items if not (doc or "").strip()]
    assert missing == [], f"{len(missing)} of {len(items)} public items have no docstring: {missing}"


def _stub_items() -> Iterator[tuple[str, Any]]:
    """``(label, docstring)`` of each name ``ferroloop`` re-exports from ``_native`` as the stub
    declares it, and of the public methods and properties of its classes (a setter shares its
    property's docstring; ``__new__`` its class's)."""
    modules = _modules_of()
    native = {name for name in _public_names() if modules.get(name) == "_native"}
    tree = ast.parse((PACKAGE / "_native.pyi").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in native:
            found.add(node.name)
            yield node.name, ast.get_docstring(node)
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if not isinstance(member, ast.FunctionDef) or member.name == "__new__":
                        continue
                    if member.name.startswith("_") and member.name != "__len__":
                        continue
                    if any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in member.decorator_list):
                        continue
                    yield f"{node.name}.{member.name}", ast.get_docstring(member)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in native:
            found.add(node.target.id)  # a constant (__version__): no docstring to give
    assert found == native, f"not declared in _native.pyi: {sorted(native - found)}"


def test_native_stub_has_docstrings() -> None:
    items = list(_stub_items())
    assert len(items) > 40, f"only {len(items)} stub items found"
    missing = [label for label, doc in items if not (doc or "").strip()]
    assert missing == [], f"{len(missing)} of {len(items)} stub items have no docstring: {missing}"


def test_type_aliases_have_doc_comments() -> None:
    """Each public name bound by an assignment (a ``Union``, a ``Literal``, a functional
    ``TypedDict``) has a ``#:`` comment on the line before it, or a ``Name.__doc__ = ...``."""
    modules = _modules_of()
    missing = []
    checked = 0
    for name in _public_names():
        module = modules.get(name)
        if module is None or module == "_native":
            continue
        path = PACKAGE / f"{module}.py"
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.parse(source).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target if isinstance(node, ast.AnnAssign) else None
            if not isinstance(target, ast.Name) or target.id != name:
                continue
            checked += 1
            comment = lines[node.lineno - 2].lstrip() if node.lineno > 1 else ""
            if not comment.startswith("#:") and f"\n{name}.__doc__ =" not in source:
                missing.append(f"{path.name}:{node.lineno} {name}")
    assert checked > 0
    assert missing == [], f"public aliases without a #: comment: {missing}"
