"""What the user keeps: collections and their ingestion, files added through the page, files attached to a
conversation, the conversations themselves, and the CPU shared between answering and indexing."""
