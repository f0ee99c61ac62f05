"""YAML of user files read with aliases bounded: the one way the harness parses a spec, a fragment, a
paper's registry file, a grade file or a declaration file.

A YAML alias (``*name``) stands for the whole node of its anchor, so nine lines of aliases of aliases
(the "billion laughs") compose to a graph of a few dozen nodes that stands for 10^9. PyYAML shares the
nodes, but everything that walks the document expands them: ``yaml_key_lines`` took 2.3 GB in 20 s on
such a spec before it was killed, and merge keys (``<<: *a``) copy entries at construction. Here the
composed graph is measured before anything walks or constructs it: its size with every alias expanded
(shared nodes counted once per use, in time linear in the graph), refused when the aliases add more
than :data:`ALIAS_NODES_MAX` nodes, or when an alias refers to a node that contains it. The refusal is
a ``yaml.YAMLError`` with ``problem`` and ``problem_mark``, so each reader's own handler reports it as
one line naming the file and the line, as it does any invalid YAML.

The same walk bounds the nesting (:data:`DEPTH_MAX` levels, aliases expanded): every reader after it
recurses, and 10,000 nested lists were a RecursionError traceback. The text itself is bounded too
(:data:`CHARS_MAX`), before the parser sees it.
"""

from __future__ import annotations

from typing import Any

import yaml

ALIAS_NODES_MAX = 1_000_000  # nodes aliases may add; the project's largest file uses none (~10^5 nodes)
DEPTH_MAX = 64  # nesting levels; the project's deepest file has 7
CHARS_MAX = 16 * 1024 * 1024  # characters of one user file; the project's largest is ~28 KB
FAST_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~50x faster where built


class BoundError(yaml.YAMLError):
    """A document past one of the bounds; ``FIX`` says what to change."""

    FIX = "make the file smaller or flatter"

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark

    def __str__(self) -> str:
        where = f" (line {self.problem_mark.line + 1})" if self.problem_mark is not None else ""
        return self.problem + where


class AliasBombError(BoundError):
    """A document whose aliases expand past the bound (or into themselves)."""

    FIX = "write the values out, or nest fewer aliases of aliases"


class DepthError(BoundError):
    """A document nested deeper than :data:`DEPTH_MAX` levels."""

    FIX = f"nest at most {DEPTH_MAX} levels of lists and mappings"


class SizeError(BoundError):
    """A document longer than :data:`CHARS_MAX` characters."""

    FIX = f"keep the file under {CHARS_MAX // (1024 * 1024)} MiB"


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def check_aliases(node: yaml.Node | None, limit: int = ALIAS_NODES_MAX, depth_max: int = DEPTH_MAX) -> int:
    """The number of nodes ``node`` stands for with its aliases expanded; AliasBombError past
    ``limit`` added nodes or on a node that contains itself, DepthError when nested deeper than
    ``depth_max``. Iterative: a deep document is no recursion."""
    if node is None:
        return 0
    expanded: dict[int, int] = {}
    height: dict[int, int] = {}  # levels below and including the node, aliases expanded
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, done = stack.pop()
        key = id(current)
        if done:
            open_.discard(key)
            children = _children(current)
            size = 1 + sum(expanded[id(c)] for c in children)
            expanded[key] = size
            height[key] = 1 + max((height[id(c)] for c in children), default=0) if children else 0
            if height[key] > depth_max:
                raise DepthError(f"nested deeper than {depth_max} levels", current.start_mark)
            if size - len(expanded) > limit:  # what aliases add over the distinct nodes seen so far
                raise AliasBombError(
                    f"its aliases (*name) expand the document by more than {limit:,} nodes (an alias bomb)",
                    current.start_mark,
                )
            continue
        if key in expanded:
            continue
        if key in open_:
            raise AliasBombError(
                "an alias (*name) refers to a node that contains it (a recursive document)", current.start_mark
            )
        open_.add(key)
        stack.append((current, True))
        stack.extend((c, False) for c in _children(current) if id(c) not in expanded)
    return expanded[id(node)]


def compose(text: str, loader: type = FAST_LOADER) -> yaml.Node | None:
    """The document's node graph, its aliases checked (:func:`check_aliases`)."""
    return load_with_node(text, loader, construct=False)[0]


def load(text: str, loader: type = FAST_LOADER) -> Any:
    """The document's data (``yaml.safe_load`` with ``loader``, a SafeLoader or a subclass of one),
    its aliases checked before it is constructed."""
    return load_with_node(text, loader)[1]


def load_with_node(text: str, loader: type = FAST_LOADER, construct: bool = True) -> tuple[yaml.Node | None, Any]:
    """The node graph (for key lines) and the data of one document, from a single parse."""
    if len(text) > CHARS_MAX:
        raise SizeError(f"{len(text):,} characters, more than the {CHARS_MAX:,} a file may hold", None)
    parser = loader(text)
    try:
        try:
            node = parser.get_single_node()
        except RecursionError:  # PyYAML's pure-Python composer recurses once per level
            raise DepthError(f"nested deeper than {DEPTH_MAX} levels", None) from None
        check_aliases(node)
        data = parser.construct_document(node) if construct and node is not None else None
    finally:
        parser.dispose()
    return node, data
