"""`lab forecast`: how a job rehearsed on a small lab will scale, from its record alone (pure: no lab needed).

rehearsal.py reads a profiled run's record, model.py is the collective cost model and the replay of a step,
forecast.py the rows, what-ifs and assumptions, plot.py the picture.
"""
