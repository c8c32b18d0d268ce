"""Stage 30, numerics: matched-token KL and NLL against a reference, the kld kind."""
