"""The foundation every layer stands on: config, run store, processes, verdicts, errors."""
