"""Understanding a run after it ran: its record, the stacks and Flight Recorder dumps taken from it, the diagnosis,
`lab explain`'s account and its line per rank, the timeline, the graph and the HTML report. lab/jobs/ runs jobs and
writes the record; this package reads it."""
