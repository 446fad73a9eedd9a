"""Keeping the stores sound: their health check, salvaging rows from a damaged file, rebuilding, and `hearth
repair`."""
