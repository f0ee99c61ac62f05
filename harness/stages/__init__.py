"""The declared stage graph and what every stage writes through: the content-keyed cache and the checkpoints.

``graph.py`` declares each stage once (what it reads, its plan lines, its cost, its family's pipeline);
``artifacts.py`` is the cache (``cache/<stage>/<key>/``, one finished marker); ``checkpoints.py`` says
where a named checkpoint lives.
"""
