"""Understanding a run after it ran: its record, the stacks taken from it, the diagnosis, `lab explain`'s account,
the timeline, the graph and the HTML report. lab/jobs/ runs jobs and writes the record; this package reads it."""
