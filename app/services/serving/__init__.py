"""The one loaded model: its supervised engine process, what it hands out, the first answer it must give, restarts,
the model actions every front end shares, and where the running Hearth listens."""
