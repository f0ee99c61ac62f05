"""What people read: the at-a-glance overview of the papers' claims and the static HTML report.

``overview.py`` is the data (pure, no rendering); ``glance_html.py`` renders it for the leaderboard and
the report; ``report_html.py`` writes ``report --html``.
"""
