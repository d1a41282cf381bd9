"""Analysis of summaries and bench rows: the cross-tool join, the table of backends, run-against-run
regression, and the ncu diagnosis. Reads no file and prints nothing."""
