"""The Streamlit leaderboard: reported cells of the papers next to reproduced run records.

Data shaping lives in plain functions (data.py loads, tables.py and plots.py shape) so tests
can call them without Streamlit; app.py only lays the page out.
"""
