"""A checkpoint that cannot be loaded: the fix fits where it lies. A stage's output in the cache is
rebuilt (no Hub holds it), a checkpoint elsewhere is downloaded again."""

from __future__ import annotations

import pytest

from harness.core.errors import HarnessError
from harness.core.paths import cache_dir
from harness.stages.checkpoints import load_pretrained


class _Damaged:
    @staticmethod
    def from_pretrained(path: str, **_kwargs):
        raise OSError(f"Unable to load weights from {path}")


def test_a_damaged_stage_output_in_the_cache_is_rebuilt_not_downloaded():
    folder = cache_dir() / "pretrain" / "0123abcd" / "model"
    folder.mkdir(parents=True)
    with pytest.raises(HarnessError) as exc:
        load_pretrained(_Damaged, folder, "a checkpoint")
    text = str(exc.value)
    assert "download" not in text and "fetch --model" not in text, text
    assert f"delete {cache_dir() / 'pretrain' / '0123abcd'} " in text and "rebuild" in text, text


def test_a_damaged_checkpoint_elsewhere_is_downloaded_again(tmp_path):
    folder = tmp_path / "models" / "some-org" / "some-model"
    folder.mkdir(parents=True)
    with pytest.raises(HarnessError) as exc:
        load_pretrained(_Damaged, folder, "a checkpoint")
    assert "download the checkpoint again (python -m harness fetch --model NAME)" in str(exc.value)
