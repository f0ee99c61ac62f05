"""What people read: the at-a-glance overview of the papers' claims and the static HTML report.

``overview.py`` is the data (pure, no rendering); ``glance_html.py`` renders it for the leaderboard and
the report; ``report_html.py`` writes ``report --html`` (its summary and gate pages); ``report_pages.py``
renders its other pages (one per paper, the learned runs) and the frame every page shares.
"""
