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
"""

from __future__ import annotations

from typing import Any

import yaml

ALIAS_NODES_MAX = 1_000_000  # nodes aliases may add; the project's largest file uses none (~10^5 nodes)
FAST_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~50x faster where built


class AliasBombError(yaml.YAMLError):
    """A document whose aliases expand past the bound (or into themselves)."""

    FIX = "write the values out, or nest fewer aliases of aliases"

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark

    def __str__(self) -> str:
        where = f" (line {self.problem_mark.line + 1})" if self.problem_mark is not None else ""
        return self.problem + where


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def check_aliases(node: yaml.Node | None, limit: int = ALIAS_NODES_MAX) -> int:
    """The number of nodes ``node`` stands for with its aliases expanded; AliasBombError past
    ``limit`` added nodes or on a node that contains itself. Iterative: a deep document is no recursion."""
    if node is None:
        return 0
    expanded: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, done = stack.pop()
        key = id(current)
        if done:
            open_.discard(key)
            size = 1 + sum(expanded[id(c)] for c in _children(current))
            expanded[key] = size
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
    parser = loader(text)
    try:
        node = parser.get_single_node()
        check_aliases(node)
        data = parser.construct_document(node) if construct and node is not None else None
    finally:
        parser.dispose()
    return node, data
