"""The Streamlit leaderboard: reported cells of the papers next to reproduced run records.

Data shaping lives in plain functions (data.py loads, tables.py and plots.py shape, selection.py picks the
runs a grid shows, display.py formats numbers, glance.py builds the "At a glance" tab) so tests can call
them without Streamlit; app.py only lays the page out.
"""
