"""`python -m qualify` runs the CLI."""

from qualify.cli import main

if __name__ == "__main__":
    main()
