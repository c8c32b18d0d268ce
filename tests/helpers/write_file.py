"""A check command that writes its second argument verbatim to the file named first."""

import sys

with open(sys.argv[1], "w") as handle:
    handle.write(sys.argv[2])
