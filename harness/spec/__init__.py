"""A method's declaration: its YAML spec and profiles, the typed settings blocks, the keys a spec may state.

``method.py`` resolves a spec (``extends:``, fragments, profiles) from ``files.py``'s reading, checked by
``checks.py`` against ``schema.py`` (the keys a spec may state) and hashed by ``hashing.py``; ``settings.py``
declares what a typed setting is; ``block_settings.py``, ``stage_settings.py`` and ``run_settings.py`` (data,
hardware, model, the finetune block's own keys) are the blocks (each setting's meaning, default, kind and
which stages' cache keys hold it); ``keys.py`` derives the nested keys a spec may hold; ``kinds.py`` the value
kinds; ``conditions.py`` what a run states for grading; ``paper_profiles.py`` and ``rehearsal.py`` the paper
and rehearsal profiles, ``declarations.py`` what a paper profile declares about itself (merged across
``extends:``). The checks that build trainer configs live above the trainers, in
:mod:`harness.run.validation`.
"""
