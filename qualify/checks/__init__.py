"""The check-kind contract, the registry the spine looks kinds up in, and the generic kinds."""
