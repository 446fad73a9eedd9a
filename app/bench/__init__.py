"""``hearth bench …``: Hearth's own paths against the raw engine, in one run, with the spread of repeated runs."""
