"""What every layer shares, in the lowest one so that any may import it: the typed errors with their remedies, the
SQLite wrapper the stores use, files kept private to this account, and words for sizes and counts in messages.
Nothing here imports anything else of Hearth."""
