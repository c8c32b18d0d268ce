"""Stage 50, soak: long load under memory pressure, trends of memory over time, the soak kind."""
