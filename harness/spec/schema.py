"""What a spec may say: its top-level keys and their kinds, the profiles, the keys that document rather than
run, and the keys that are retired.
"""

from __future__ import annotations

from harness.stages.graph import FAMILIES, SPEC_STEPS

PROFILES = ("paper", "rehearsal", "mini", "tiny")


# Derived from the paper profile (harness.spec.rehearsal) for every trained method that has one; a spec's
# own `profiles.rehearsal` block is merged last.
DERIVED_PROFILE = "rehearsal"


# key -> (required, allowed python types, one-line meaning). Checked after resolution.
SCHEMA: dict[str, tuple[bool, tuple[type, ...], str]] = {
    "name": (True, (str,), "method name, equal to the file name"),
    "description": (True, (str,), "one line shown by `ls`"),
    "family": (True, (str,), f"one of {', '.join(FAMILIES)}"),
    "papers": (True, (list,), "reported-registry paper keys whose cells this method is compared with"),
    "stages": (True, (list,), f"the method's steps, in order, from: {', '.join(SPEC_STEPS)}"),
    "datasets": (True, (list,), "benchmarks evaluated by default"),
    "hardware": (False, (dict,), "declared hardware: {devices, device_type, hours}"),
    "model": (False, (dict,), "initial encoder: a checkpoint name/path, or an architecture to build from scratch"),
    "tokenizer": (False, (dict,), "tokenizer: a checkpoint's, or a WordPiece vocabulary trained on the corpus"),
    "corpus": (False, (dict,), "pre-training corpus construction (sources, splitter, passage length, seed)"),
    "qgen": (False, (dict,), "query generation for query-as-context pre-training"),
    "retrieval": (False, (dict,), "retrieval settings"),
    "pretrain": (False, (dict,), "pre-training settings"),
    "finetune": (False, (dict,), "fine-tuning settings"),
    "conditions": (
        False,
        (dict,),
        "not written by hand: the conditions a run states are derived from its settings (harness/spec/conditions.py)",
    ),
    "extends": (False, (str,), "parent spec name"),
    "variant_of": (
        False,
        (dict,),
        "{method: the spec it extends, conditions: [condition keys]}: a declared variant of a paper's setting; "
        "its paper runs are graded against the parent's cells that state one of these conditions "
        "(harness/spec/conditions.py); the method's own, so not inherited",
    ),
    "include": (False, (str, list), "shared fragments (baselines/fragments/<name>.yaml) this spec's own keys override"),
    "profiles": (False, (dict,), "per-profile overrides"),
    "data": (
        False,
        (dict,),
        "where the data comes from: a mirror of the upstream files, the MS MARCO passage variant (plain or titled)",
    ),
    "notes": (False, (str, list), "free text"),
    "substitutions": (
        False,
        (list,),
        "where this setting departs from the paper's (printed with every run and recorded)",
    ),
    "deviations": (
        False,
        (list,),
        "where the paper profile departs from a setting the paper states: "
        "{about: key path, touches: [conditions] | recipe, why: text}; the cells "
        "stating a touched condition are NOT-COMPARABLE; merged by `about` across "
        "extends ({drop: about} removes one; listed by `validate`)",
    ),
    "assumptions": (
        False,
        (list,),
        "values the papers leave unstated that the spec picks: {about: key path, "
        "why: text}; merged by `about` across extends (listed by `validate`)",
    ),
    "compare_with": (
        False,
        (list,),
        "the methods this one is measured against: its effects are it minus each, "
        "paired on the same queries in every profile (`effects`, `check`); the "
        "method's own, so not inherited through `extends`",
    ),
}


# Keys that say what a method is rather than how one profile runs it: not in a profile block or a fragment.
METHOD_KEYS = ("name", "extends", "include", "profiles", "compare_with", "variant_of")


NOT_INHERITED = ("compare_with", "variant_of")  # a spec that extends another states its own comparisons


# What a `profiles.<name>` block may override (it is deep-merged over the top level); nested keys: spec_keys.
PROFILE_KEYS = tuple(k for k in SCHEMA if k not in METHOD_KEYS)


FRAGMENTS = "fragments"  # folder of shared spec fragments, beside the specs


# What a spec says about a run rather than what runs: never part of its identity.
DOCUMENTATION_KEYS = (
    "description",
    "notes",
    "papers",
    "deviations",
    "assumptions",
    "substitutions",
    "conditions",
    "compare_with",
    "variant_of",
)


# Keys a spec may no longer state, with what now decides what they said (``validate`` names it).
RETIRED = {
    ("finetune", "mine"): "is retired: mining searches each training query to the negative_depth of the "
    "stage that trains on the mined run (finetune.retriever2.negative_depth; "
    "retriever3's for learned-sparse's second mining), so state that instead"
}
BM25_NEGATIVE_SOURCES = ("own", "msmarco-triples", "tevatron")  # data.bm25_negatives (harness.pipelines.bm25)
# finetune.hard_negatives: the published hard-negative files retriever 1 may train on (harness.data.hard_negatives)
HARD_NEGATIVE_FILES = ("msmarco-sbert-hard-negatives",)
