"""Spec loading: extends inheritance, profiles, and errors that name file, line and fix."""

from __future__ import annotations

import textwrap

import pytest

from harness.core.errors import DataFormatError, HarnessError, UnknownNameError
from harness.spec.conditions import derived
from harness.spec.method import load_method, validate_specs
from harness.stages.artifacts import config_hash

BASE = """\
name: base
description: a base method
family: dense
papers: [qc-v2]
stages: [pretrain, finetune_r1, evaluate]
datasets: [scifact]
pretrain: {objective: cotmae, lr: 1.0e-4, steps: 10}
profiles:
  paper: {pretrain: {steps: 50000}}
  tiny: {pretrain: {steps: 20}}
"""


def write(tmp_path, name, text):
    (tmp_path / f"{name}.yaml").write_text(textwrap.dedent(text))


def test_extends_and_profile_merge(tmp_path):
    write(tmp_path, "base", BASE)
    write(tmp_path, "child", "name: child\nextends: base\ndescription: child\npretrain: {context: qc}\n")
    paper = load_method("child", "paper", tmp_path)
    tiny = load_method("child", "tiny", tmp_path)
    assert paper.get("pretrain") == {"objective": "cotmae", "lr": 1.0e-4, "steps": 50000, "context": "qc"}
    assert tiny.get("pretrain.steps") == 20
    assert paper.spec_hash != tiny.spec_hash
    assert paper.spec_hash == load_method("child", "paper", tmp_path).spec_hash


def test_include_merges_a_fragment_under_the_spec_and_leaves_no_trace_in_the_hash(tmp_path):
    write(tmp_path, "base", BASE)
    (tmp_path / "fragments").mkdir()
    write(
        tmp_path / "fragments",
        "qc",
        "qgen: {model: tiny-t5, num_queries: 3}\npretrain: {context: qc, lr: 9.0}\n"
        "profiles: {tiny: {qgen: {steps: 5}}}\n",
    )
    write(
        tmp_path,
        "inline",
        "name: inline\nextends: base\ndescription: child\nqgen: {model: tiny-t5, num_queries: 3}\n"
        "pretrain: {context: qc, lr: 1.0}\nprofiles: {tiny: {qgen: {steps: 5}}}\n",
    )
    write(tmp_path, "included", "name: included\nextends: base\ndescription: child\ninclude: qc\npretrain: {lr: 1.0}\n")
    for profile in ("paper", "tiny"):
        inline, included = load_method("inline", profile, tmp_path), load_method("included", profile, tmp_path)
        assert {k: v for k, v in included.config.items() if k != "name"} == {
            k: v for k, v in inline.config.items() if k != "name"
        }  # the spec's own lr wins over the fragment's
    assert load_method("included", "tiny", tmp_path).get("qgen.steps") == 5
    assert "include" not in load_method("included", "paper", tmp_path).config


def test_an_unknown_fragment_and_a_fragment_naming_the_method_are_errors(tmp_path):
    write(tmp_path, "base", BASE)
    (tmp_path / "fragments").mkdir()
    write(tmp_path / "fragments", "qc", "qgen: {num_queries: 3}\n")
    write(tmp_path, "child", "name: child\nextends: base\ndescription: c\ninclude: [qcc]\n")
    with pytest.raises(DataFormatError, match=r"child.yaml:4.*no fragment .qcc..*Did you mean: qc"):
        load_method("child", "paper", tmp_path)
    write(tmp_path / "fragments", "bad", "name: other\n")
    write(tmp_path, "child", "name: child\nextends: base\ndescription: c\ninclude: bad\n")
    with pytest.raises(DataFormatError, match=r"bad.yaml:1.*a fragment may not set 'name'"):
        load_method("child", "paper", tmp_path)


def test_a_spec_in_another_folder_includes_the_project_s_fragments(tmp_path):
    write(tmp_path, "base", BASE)
    write(tmp_path, "mine", "name: mine\nextends: base\ndescription: c\ninclude: query_as_context\n")
    spec = load_method("mine", "tiny", tmp_path)  # no fragments/ beside it: baselines/fragments/ is used
    assert spec.get("pretrain.context") == "qc" and spec.get("qgen.model") == "tiny-t5"
    assert {k: derived(spec.config)[k] for k in ("query_number", "mixed")} == {"query_number": 5, "mixed": False}


def test_query_as_context_conditions_are_derived_and_writing_them_is_an_error(tmp_path):
    write(tmp_path, "base", BASE)
    write(tmp_path, "qc", "name: qc\nextends: base\ndescription: c\nqgen: {num_queries: 10}\npretrain: {context: qc}\n")
    qc = derived(load_method("qc", "paper", tmp_path).config)
    assert (qc["query_number"], qc["mixed"]) == (10, False)
    write(
        tmp_path,
        "mixed",
        "name: mixed\nextends: base\ndescription: c\nqgen: {num_queries: 5}\npretrain: {context: mixed}\n",
    )
    mixed = derived(load_method("mixed", "paper", tmp_path).config)
    assert (mixed["query_number"], mixed["mixed"]) == (5, True)
    # a condition typed by hand could disagree with what runs: only deviations are declared
    write(
        tmp_path,
        "typed",
        "name: typed\nextends: base\ndescription: c\nqgen: {num_queries: 5}\n"
        "pretrain: {context: qc}\nconditions: {query_number: 20}\n",
    )
    with pytest.raises(HarnessError, match=r"typed.yaml:6: conditions are derived .*deviations"):
        load_method("typed", "paper", tmp_path)
    assert not {"query_number", "mixed"} & set(derived(load_method("base", "paper", tmp_path).config))


def test_unknown_method_did_you_mean(tmp_path):
    write(tmp_path, "base", BASE)
    with pytest.raises(UnknownNameError, match="Did you mean: base"):
        load_method("bsae", "paper", tmp_path)


def test_malformed_yaml_names_line(tmp_path):
    write(tmp_path, "base", BASE + "oops: [unclosed\n")
    with pytest.raises(DataFormatError) as err:
        load_method("base", "paper", tmp_path)
    assert "base.yaml:" in str(err.value) and "invalid YAML" in str(err.value)


def test_a_key_given_twice_is_an_error_with_both_lines(tmp_path):
    # PyYAML keeps the last: a second `pretrain:` would silently replace the first, objective and all
    write(tmp_path, "base", BASE + "pretrain: {steps: 3}\n")
    first = BASE.splitlines().index(next(line for line in BASE.splitlines() if line.startswith("pretrain"))) + 1
    with pytest.raises(DataFormatError) as err:
        load_method("base", "paper", tmp_path)
    text = str(err.value)
    assert f"key 'pretrain' given twice (lines {first} and {len(BASE.splitlines()) + 1})" in text
    assert "base.yaml:" in text and "merge the two" in text


def test_stages_that_list_pretrain_need_an_objective(tmp_path):
    write(
        tmp_path,
        "base",
        BASE.replace("pretrain: {objective: cotmae, lr: 1.0e-4, steps: 10}", "pretrain: {lr: 1.0e-4, steps: 10}"),
    )
    text = "\n".join(validate_specs(tmp_path))
    assert "stages lists 'pretrain' but pretrain.objective is not set" in text and "base.yaml:" in text


def test_unknown_key_and_wrong_type_are_reported(tmp_path):
    write(tmp_path, "base", BASE.replace("stages: [pretrain, finetune_r1, evaluate]", "stages: pretrain\nstagse: []"))
    problems = validate_specs(tmp_path)
    text = "\n".join(problems)
    assert "base.yaml:6: unknown key 'stagse' (did you mean stages?)" in text
    assert "'stages' must be list" in text
    assert sum("'stagse'" in p for p in problems) == 1  # once, not once per profile
    with pytest.raises(HarnessError, match="invalid spec"):
        load_method("base", "paper", tmp_path)


def test_a_misspelt_misordered_or_impossible_step_in_stages_is_an_error(tmp_path):
    # a misspelt finetune_r2 would otherwise skip retriever 2 without a word
    write(
        tmp_path,
        "base",
        BASE.replace(
            "stages: [pretrain, finetune_r1, evaluate]", "stages: [pretrain, finetune_r1, mine, finetune_2, evaluate]"
        ),
    )
    text = "\n".join(validate_specs(tmp_path))
    assert "base.yaml:5: unknown step 'finetune_2' in stages (did you mean finetune_r2?" in text
    write(
        tmp_path,
        "base",
        BASE.replace("stages: [pretrain, finetune_r1, evaluate]", "stages: [finetune_r1, pretrain, evaluate]"),
    )
    assert "step 'pretrain' comes after 'finetune_r1'" in "\n".join(validate_specs(tmp_path))
    write(
        tmp_path,
        "base",
        BASE.replace("stages: [pretrain, finetune_r1, evaluate]", "stages: [pretrain, pretrain, evaluate]"),
    )
    with pytest.raises(HarnessError, match="'pretrain' is listed 2 times"):
        load_method("base", "paper", tmp_path)
    # steps the family's pipeline cannot run, or would run unlisted, or without what they need
    write(
        tmp_path,
        "base",
        BASE.replace(
            "stages: [pretrain, finetune_r1, evaluate]", "stages: [pretrain, finetune_r1, finetune_r2, finetune_r3]"
        ),
    )
    text = "\n".join(validate_specs(tmp_path))
    assert "a dense method cannot run step 'finetune_r3'" in text
    assert "step 'finetune_r2' needs 'mine' before it in stages" in text
    assert "a dense method always runs step 'evaluate'; list it in stages" in text
    # a profile's own outline is checked too
    write(tmp_path, "base", BASE.replace("  tiny: {pretrain: {steps: 20}}", "  tiny: {stages: [finetune_r1, evaluat]}"))
    assert "unknown step 'evaluat' in stages (did you mean evaluate?" in "\n".join(validate_specs(tmp_path))


def test_missing_profile_and_circular_extends(tmp_path):
    write(tmp_path, "base", BASE.replace("  tiny: {pretrain: {steps: 20}}\n", ""))
    with pytest.raises(HarnessError, match="has no 'tiny' profile"):
        load_method("base", "tiny", tmp_path)
    write(tmp_path, "a", "name: a\nextends: b\n")
    write(tmp_path, "b", "name: b\nextends: a\n")
    assert any(p.endswith("a.yaml:2: circular extends: b -> a -> b") for p in validate_specs(tmp_path))


def test_config_hash_is_order_independent():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})


def test_project_specs_are_valid():
    assert validate_specs() == []


def test_compare_with_is_the_method_s_own_documentation(tmp_path):
    """`compare_with` names what the method's effects are measured against: never part of a spec's hash (the
    committed records are matched by it), not inherited through extends, not set per profile."""
    from harness.spec.method import comparisons

    write(tmp_path, "base", BASE)
    write(
        tmp_path,
        "control",
        "name: control\nextends: base\ndescription: c\nstages: [finetune_r1, evaluate]\npretrain: {objective: none}\n",
    )
    write(tmp_path, "child", "name: child\nextends: base\ndescription: c\ncompare_with: [control, base]\n")
    before = load_method("base", "paper", tmp_path).spec_hash
    write(tmp_path, "base", BASE + "compare_with: [control]\n")
    assert load_method("base", "paper", tmp_path).spec_hash == before
    assert load_method("base", "tiny", tmp_path).config["compare_with"] == ["control"]
    assert "compare_with" not in load_method("control", "paper", tmp_path).config  # not inherited from base
    assert comparisons(tmp_path) == [("base", "control"), ("child", "control"), ("child", "base")]
    assert validate_specs(tmp_path) == []
    write(tmp_path, "base", BASE.replace("  tiny:", "  mini: {compare_with: [control]}\n  tiny:"))
    assert "unknown key 'compare_with' in profile 'mini'" in "\n".join(validate_specs(tmp_path))


def test_compare_with_names_other_known_methods_once(tmp_path):
    write(tmp_path, "base", BASE + "compare_with: [bsae, base, control, control]\n")
    write(
        tmp_path,
        "control",
        "name: control\nextends: base\ndescription: c\nstages: [finetune_r1, evaluate]\npretrain: {objective: none}\n",
    )
    text = "\n".join(validate_specs(tmp_path))
    assert "compare_with[0]: unknown method 'bsae'" in text and "Did you mean: base?" in text
    assert "compare_with[1]: a method is not compared with itself" in text
    assert "compare_with[3]: 'control' is listed twice" in text
