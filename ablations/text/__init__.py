"""What people read: how numbers print, and the progress lines' channel.

units.py  durations, money, metric values and times, printed one way everywhere
say.py    a progress line to the terminal and the `ablate.progress` logger
"""
