"""The parts of loading: which files, how a CSV file is read, how files are put together, what
loading noticed and guessed (`notes`), numbers written as text, and the roles found by behaviour."""
