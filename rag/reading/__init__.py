"""Reading documents: one loader per kind of file (PDF, Word, HTML, Markdown, text, CSV), the limits a read keeps,
and the separate process that runs every read (``reader``, ``reader_worker``)."""
