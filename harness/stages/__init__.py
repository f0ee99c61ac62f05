"""The declared stage graph and what every stage writes through: the content-keyed cache and the checkpoints.

``graph.py`` declares each stage once (what it reads, whether it has plan lines and a cost) and each family;
``registry.py`` holds the functions the modules above register for them (plan lines, cost, each family's
pipeline), by decorator;
``artifacts.py`` is the cache (``cache/<stage>/<key>/``, one finished marker); ``checkpoints.py`` says
where a named checkpoint lives.
"""
