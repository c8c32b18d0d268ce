"""The distribution stage: the candidate's sources kept, its closure in a signed binary cache, and
the change that makes it the default."""
