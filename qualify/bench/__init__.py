"""Stage 60, bench: interleaved repetitions judged with rank statistics, the bench kind."""
